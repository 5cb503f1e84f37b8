//! The worker sandbox on Linux: a hire's command wrapped in bubblewrap.
//!
//! A hire runs as the owner's user, so only the kernel can keep it from the
//! owner's secrets. With `fleet.workerSandbox` on, every new local hire
//! starts as `bwrap <flags> -- <command>`. The hire sees the filesystem as
//! the owner does, except:
//!
//! - the state folder is an empty tmpfs holding only `run/fleet/` (the
//!   gateway's local MCP socket and its discovery file), bound read-only; the
//!   owner credential, the logs and every internal socket are not there;
//! - `~/.config/clankie/`, the user's runtime folder (systemd and D-Bus user
//!   sockets) and the folders of the linked multiplexer sockets and of
//!   `$CLANKIE_CREDENTIALS_FILE` are empty tmpfs folders (a file in a folder
//!   shared with the hire's work is covered alone, by `/dev/null` on a
//!   no-device mount);
//! - the stack's binary folder and every folder on the stack's `PATH` are
//!   read-only: the services run those programs later, unconfined;
//! - every ancestor folder of a cover is a mount point inside the sandbox,
//!   so renaming it (to give a protected file a path the covers do not
//!   name) fails with EBUSY; each cover is itself a mount point too.
//!
//! Namespaces: a new user namespace (no capabilities, no nested user
//! namespaces), pid namespace (no outside process is visible, so no
//! `/proc/PID/root` walk), IPC and cgroup namespaces. The network namespace
//! is shared: the harness needs its model provider. The pid namespace does
//! not break the pane-lineage proof: the kernel names the peer of a local
//! connection in the gateway's namespace, and the census helper reads the
//! whole ancestry there (agent, bwrap, the pane's process). bwrap keeps the
//! pane's session and process group (no `--new-session`), so the terminal's
//! foreground group is still the one the seat proof reads.
//!
//! A missing `bwrap` or no user namespaces refuses the hire
//! (`worker_sandbox_unavailable`); a hire never starts unconfined.

use std::path::{Path, PathBuf};

use crate::code::{ClankieError, ErrorCode};

/// What a sandboxed hire must not see, and what it must not change.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    /// The state folder (replaced by a tmpfs).
    pub state_root: PathBuf,
    /// The one folder of it the hire keeps: `run/fleet/`.
    pub fleet_dir: PathBuf,
    /// Folders replaced by an empty tmpfs: `~/.config/clankie`, the user's
    /// runtime folder (the systemd and D-Bus user sockets), and the folders
    /// of the multiplexer sockets and the credentials file.
    pub hidden_dirs: Vec<PathBuf>,
    /// Files covered one by one, where their folder is shared with the
    /// hire's own work (`/tmp`, the home folder): a replaced file shows
    /// through such a cover, so a folder is preferred wherever it can be.
    pub hidden_files: Vec<PathBuf>,
    /// Folders the hire may read but not change: the stack's own binaries
    /// and every folder on the stack's `PATH`, whose programs the services
    /// run later, unconfined.
    pub read_only: Vec<PathBuf>,
    /// Folders a folder cover must never swallow (the hire's workspace).
    pub keep: Vec<PathBuf>,
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn env_path(k: &str) -> Option<PathBuf> {
    std::env::var_os(k)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl Protected {
    /// The protected paths for a stack at `paths` and a hire working in
    /// `workspace`, with this process's environment naming the home, the
    /// runtime folder, the credentials file and `PATH`.
    pub fn for_stack(paths: &crate::paths::StatePaths, workspace: &Path) -> Protected {
        let state_root = canonical(paths.root());
        let fleet_dir = state_root.join("run").join("fleet");
        let mut p = Protected {
            state_root,
            fleet_dir,
            keep: vec![canonical(workspace)],
            ..Default::default()
        };
        if let Some(home) = env_path("HOME") {
            p.hidden_dirs.push(home.join(".config").join("clankie"));
        }
        let runtime = env_path("XDG_RUNTIME_DIR").map(|d| canonical(&d));
        let user_run = PathBuf::from(format!("/run/user/{}", nix::unistd::getuid().as_raw()));
        for dir in runtime.into_iter().chain([user_run]) {
            if dir.is_dir() && !p.hidden_dirs.contains(&dir) {
                p.hidden_dirs.push(dir);
            }
        }
        if let Some(file) = env_path("CLANKIE_CREDENTIALS_FILE") {
            p.hide(&canonical(&file));
        }
        let mut read_only: Vec<PathBuf> = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(canonical))
            .into_iter()
            .collect();
        if let Some(path) = std::env::var_os("PATH") {
            read_only.extend(
                std::env::split_paths(&path)
                    .filter(|d| d.is_absolute() && d.is_dir())
                    .map(|d| canonical(&d)),
            );
        }
        for dir in read_only {
            // A folder holding the workspace stays writable: the hire works there.
            let holds_workspace = p.keep.iter().any(|k| k.starts_with(&dir) && *k != dir);
            if dir.parent().is_some() && !holds_workspace && !p.read_only.contains(&dir) {
                p.read_only.push(dir);
            }
        }
        p
    }

    /// Hides `file`: its whole folder when that folder is its own (a
    /// multiplexer's socket folder, a credentials folder), else the file.
    pub fn hide(&mut self, file: &Path) {
        let home = env_path("HOME").map(|h| canonical(&h));
        let shared = |dir: &Path| {
            dir.parent().is_none()
                || ["/tmp", "/var/tmp", "/run", "/dev/shm", "/dev"]
                    .iter()
                    .any(|s| dir == Path::new(s))
                || home.as_deref() == Some(dir)
                || self.keep.iter().any(|k| k.starts_with(dir))
                || self.state_root.starts_with(dir)
        };
        match file.parent() {
            Some(dir) if dir.is_dir() && !shared(dir) => {
                if !self.hidden_dirs.iter().any(|d| d == dir) {
                    self.hidden_dirs.push(dir.to_path_buf());
                }
            }
            _ => {
                if !self.hidden_files.iter().any(|f| f == file) {
                    self.hidden_files.push(file.to_path_buf());
                }
            }
        }
    }
}

/// A usable bubblewrap.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
}

/// The namespace and mount flags every sandbox starts with.
fn base_flags() -> Vec<String> {
    [
        "--unshare-user",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--bind",
        "/",
        "/",
        "--dev-bind",
        "/dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Finds `bwrap` on `PATH`.
fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| {
                    m.is_file()
                        && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
                .unwrap_or(false)
        })
}

fn unavailable(why: impl Into<String>) -> ClankieError {
    ErrorCode::WorkerSandboxUnavailable.err(format!(
        "{}; the worker sandbox is on, so nothing was started (install the bubblewrap package, \
         or turn the sandbox off with `clankie fleet set --worker-sandbox off`)",
        why.into()
    ))
}

impl Sandbox {
    /// Finds bubblewrap and shows it can start a process in new user and
    /// pid namespaces here.
    pub async fn probe() -> Result<Sandbox, ClankieError> {
        let bwrap = find_bwrap().ok_or_else(|| unavailable("bwrap is not on PATH"))?;
        let out = tokio::process::Command::new(&bwrap)
            .args(base_flags())
            .arg("--")
            .arg("true")
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|e| unavailable(format!("bwrap could not start: {e}")))?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect::<String>();
            return Err(unavailable(format!(
                "bwrap cannot create user and pid namespaces here ({why})"
            )));
        }
        Ok(Sandbox { bwrap })
    }

    /// The argv that starts `command` confined.
    pub fn wrap(&self, protected: &Protected, command: &[String]) -> Vec<String> {
        let mut argv = vec![self.bwrap.display().to_string()];
        argv.extend(base_flags());
        argv.extend(mount_flags(protected));
        argv.push("--".into());
        argv.extend(command.iter().cloned());
        argv
    }
}

/// Mounts, in order: ancestors of every cover pinned (bound onto
/// themselves, top down), the read-only folders, the covers, then the one
/// folder of the state the hire keeps.
fn mount_flags(p: &Protected) -> Vec<String> {
    let mut covered: Vec<&Path> = vec![&p.state_root];
    covered.extend(p.hidden_dirs.iter().map(PathBuf::as_path));
    covered.extend(p.hidden_files.iter().map(PathBuf::as_path));
    let mut ancestors: Vec<PathBuf> = Vec::new();
    for path in &covered {
        for a in path.ancestors().skip(1) {
            if a.parent().is_some() && !ancestors.iter().any(|x| x == a) {
                ancestors.push(a.to_path_buf());
            }
        }
    }
    // Shorter paths first, so a deeper pin is made on top of its parent's.
    ancestors.sort_by_key(|a| a.components().count());
    let mut read_only: Vec<&PathBuf> = p.read_only.iter().filter(|d| d.is_dir()).collect();
    read_only.sort_by_key(|a| a.components().count());
    let mut flags = Vec::new();
    let s = |p: &Path| p.display().to_string();
    for a in ancestors.iter().filter(|a| a.is_dir()) {
        flags.extend(["--bind".into(), s(a), s(a)]);
    }
    for d in read_only {
        flags.extend(["--ro-bind".into(), s(d), s(d)]);
    }
    flags.extend(["--tmpfs".into(), s(&p.state_root)]);
    for d in p.hidden_dirs.iter().filter(|d| d.is_dir()) {
        flags.extend(["--tmpfs".into(), s(d)]);
    }
    for f in p.hidden_files.iter().filter(|f| f.exists() && !f.is_dir()) {
        flags.extend(["--ro-bind".into(), "/dev/null".into(), s(f)]);
    }
    flags.extend(["--ro-bind".into(), s(&p.fleet_dir), s(&p.fleet_dir)]);
    flags
}

/// Creates the folders the sandbox masks, so a mask always has a mount
/// point: a credentials folder made later would otherwise show through.
pub fn prepare(protected: &Protected) -> std::io::Result<()> {
    for d in &protected.hidden_dirs {
        if !d.exists() {
            crate::state::private_dir(d)?;
        }
    }
    Ok(())
}

/// Single-quotes one word for a POSIX shell.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// `exec` and every word quoted: one line a pane's shell runs without
/// interpreting any of it, replacing itself with the command.
pub fn exec_line(argv: &[String]) -> String {
    let words: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
    format!("exec {}", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protected() -> Protected {
        Protected {
            state_root: "/home/o/.clankie".into(),
            fleet_dir: "/home/o/.clankie/run/fleet".into(),
            hidden_dirs: vec!["/home/o/.config/clankie".into()],
            ..Default::default()
        }
    }

    #[test]
    fn words_are_quoted_and_the_shell_is_replaced() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            exec_line(&["echo".into(), "$(id)".into(), "a;b".into()]),
            "exec 'echo' '$(id)' 'a;b'"
        );
    }

    #[test]
    fn the_state_is_masked_after_its_ancestors_are_pinned_and_the_fleet_folder_comes_last() {
        let p = protected();
        let sb = Sandbox {
            bwrap: "/usr/bin/bwrap".into(),
        };
        let argv = sb.wrap(&p, &["claude".into()]);
        let pos = |needle: &[&str]| {
            argv.windows(needle.len())
                .position(|w| w.iter().zip(needle).all(|(a, b)| a == b))
        };
        let state = pos(&["--tmpfs", "/home/o/.clankie"]).expect("state masked");
        let fleet = pos(&[
            "--ro-bind",
            "/home/o/.clankie/run/fleet",
            "/home/o/.clankie/run/fleet",
        ])
        .expect("fleet kept");
        assert!(state < fleet);
        assert_eq!(argv[argv.len() - 2..], ["--".to_string(), "claude".into()]);
        assert!(argv.contains(&"--unshare-pid".to_string()));
        assert!(!argv.contains(&"--new-session".to_string()));
    }

    #[test]
    fn a_socket_in_its_own_folder_hides_the_folder_and_one_in_tmp_only_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let own = dir.path().join("tmux-0");
        std::fs::create_dir_all(&own).expect("mkdir");
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(&workspace).expect("mkdir");
        let mut p = Protected {
            state_root: dir.path().join("state"),
            keep: vec![workspace.clone()],
            ..Default::default()
        };
        p.hide(&own.join("default"));
        p.hide(Path::new("/tmp/herdr.sock"));
        p.hide(&workspace.join("app.sock"));
        assert_eq!(p.hidden_dirs, vec![own]);
        assert_eq!(
            p.hidden_files,
            vec![PathBuf::from("/tmp/herdr.sock"), workspace.join("app.sock")]
        );
    }

    #[test]
    fn ancestors_are_pinned_top_down_and_root_is_never_rebound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("a").join("state");
        std::fs::create_dir_all(&state).expect("mkdir");
        let p = Protected {
            state_root: state.clone(),
            fleet_dir: state.join("run/fleet"),
            ..Default::default()
        };
        let flags = mount_flags(&p);
        let binds: Vec<&String> = flags
            .windows(3)
            .filter(|w| w[0] == "--bind" && w[1] == w[2])
            .map(|w| &w[1])
            .collect();
        assert!(!binds.iter().any(|b| b.as_str() == "/"));
        let a = dir.path().join("a").display().to_string();
        let top = dir.path().display().to_string();
        let ia = binds.iter().position(|b| **b == a).expect("parent pinned");
        let it = binds
            .iter()
            .position(|b| **b == top)
            .expect("grandparent pinned");
        assert!(it < ia);
    }
}
