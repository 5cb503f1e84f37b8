//! The worker sandbox on Linux: a hire's command wrapped in bubblewrap.
//!
//! A hire runs as the owner's user (or as root, where the stack does), so
//! only the kernel can keep it from the owner's secrets and from what the
//! services run later. With `fleet.workerSandbox` on, every new local hire
//! starts as `bwrap <flags> -- <command>`, and the sandbox is an
//! allow-list ([`mounts`] has the order):
//!
//! - the root is read-only, and so is every other filesystem;
//! - writable: the hire's workspace, the workspace's git metadata
//!   ([`git`]), the profile folders its harness keeps its config and
//!   sessions in, and private, empty `/tmp`, `/var/tmp` and `/run`;
//! - a fresh `/dev` holding the hire's own terminal and no other;
//! - `/proc` of its own pid namespace, everything in it that is not a
//!   process read-only;
//! - absent: the state folder except `run/fleet/`, `~/.config/clankie`, the
//!   user's runtime folder, the multiplexer sockets' folders, the
//!   credentials file ([`Reach`]).
//!
//! Namespaces: a new user namespace (no capabilities, no nested user
//! namespaces), pid namespace (no outside process is visible, so no
//! `/proc/PID/root` walk), IPC and cgroup namespaces. The network namespace
//! is shared: the harness needs its model provider. The pid namespace does
//! not break the pane-lineage proof: the kernel names the peer of a local
//! connection in the gateway's namespace, and the census helper reads the
//! whole ancestry there (agent, bwrap, the pane's process). bwrap keeps the
//! pane's session and process group (no `--new-session`), so the terminal's
//! foreground group is still the one the seat proof reads. The command
//! bwrap starts is the first child of the sandbox's init (pid 2 in its
//! namespace): admission tells the harness itself from anything it starts
//! by that.
//!
//! A missing `bwrap` or no user namespaces refuses the hire
//! (`worker_sandbox_unavailable`); a hire never starts unconfined.

mod git;
mod mounts;
mod reach;

pub use reach::Reach;

use std::path::PathBuf;

use crate::code::{ClankieError, ErrorCode};

/// A usable bubblewrap.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
}

/// The namespace flags every sandbox starts with.
fn namespace_flags() -> Vec<String> {
    [
        "--unshare-user",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-cgroup-try",
        "--die-with-parent",
    ]
    .map(String::from)
    .to_vec()
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
            .args(namespace_flags())
            .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
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
    pub fn wrap(&self, reach: &Reach, command: &[String]) -> Vec<String> {
        let mut argv = vec![self.bwrap.display().to_string()];
        argv.extend(namespace_flags());
        argv.extend(mounts::flags(reach));
        argv.push("--".into());
        argv.extend(command.iter().cloned());
        argv
    }
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
    fn the_command_follows_the_namespaces_and_mounts_and_keeps_the_panes_session() {
        let reach = Reach {
            state_root: "/home/o/.clankie".into(),
            fleet_dir: "/home/o/.clankie/run/fleet".into(),
            ..Default::default()
        };
        let sb = Sandbox {
            bwrap: "/usr/bin/bwrap".into(),
        };
        let argv = sb.wrap(&reach, &["claude".into()]);
        assert_eq!(argv[0], "/usr/bin/bwrap");
        assert_eq!(argv[argv.len() - 2..], ["--".to_string(), "claude".into()]);
        for flag in ["--unshare-user", "--disable-userns", "--unshare-pid"] {
            assert!(argv.iter().any(|a| a == flag), "{flag}");
        }
        assert!(
            !argv
                .iter()
                .any(|a| a == "--new-session" || a == "--as-pid-1")
        );
    }
}
