//! What one sandboxed hire may write, what it may only read, and what it
//! must not see at all, worked out for a stack and a workspace.

use std::path::{Path, PathBuf};

use crate::code::{ClankieError, ErrorCode};

/// The hire's reach. Everything not named here is read-only (the root is
/// bound read-only), apart from the private `/tmp`, `/var/tmp`, `/run` and
/// `/dev` every sandbox gets.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// The state folder (replaced by an empty tmpfs).
    pub state_root: PathBuf,
    /// The one folder of it the hire keeps, read-only: `run/fleet/`.
    pub fleet_dir: PathBuf,
    /// Folders replaced by an empty tmpfs: `~/.config/clankie`, the user's
    /// runtime folder, and the folders of the multiplexer sockets and the
    /// credentials file.
    pub hidden_dirs: Vec<PathBuf>,
    /// Files covered one by one, where their folder is shared with the
    /// hire's own work: a replaced file shows through such a cover, so a
    /// folder is preferred wherever it can be.
    pub hidden_files: Vec<PathBuf>,
    /// What the services run later, unconfined (the stack's binaries and
    /// every folder on the stack's `PATH`): bound read-only again on top of
    /// any writable folder or private tmpfs that holds them, so they stay
    /// visible and stay unchanged.
    pub read_only: Vec<PathBuf>,
    /// The folders the hire may write: its workspace, the workspace's git
    /// metadata, and its profile folders (where its harness keeps its
    /// config and sessions).
    pub writable: Vec<PathBuf>,
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn env_path(k: &str) -> Option<PathBuf> {
    std::env::var_os(k)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Folders whose contents are everybody's work, never one secret's own.
const SHARED: [&str; 6] = ["/tmp", "/var/tmp", "/run", "/dev/shm", "/dev", "/"];

impl Reach {
    /// The reach of a hire working in `workspace` with `profiles`, for a
    /// stack at `paths` whose multiplexers listen on `sockets`, with this
    /// process's environment naming the home, the runtime folder, the
    /// credentials file and `PATH`. A profile folder that holds what the
    /// hire must not change or see, or lies inside the state or the stack's
    /// binaries, is refused.
    pub fn for_stack(
        paths: &crate::paths::StatePaths,
        workspace: &Path,
        sockets: &[PathBuf],
        profiles: &[PathBuf],
    ) -> Result<Reach, ClankieError> {
        let state_root = canonical(paths.root());
        let fleet_dir = state_root.join("run").join("fleet");
        let workspace = canonical(workspace);
        let mut r = Reach {
            state_root,
            fleet_dir,
            ..Default::default()
        };
        if let Some(home) = env_path("HOME") {
            r.hidden_dirs.push(home.join(".config").join("clankie"));
        }
        let runtime = env_path("XDG_RUNTIME_DIR").map(|d| canonical(&d));
        let user_run = PathBuf::from(format!("/run/user/{}", nix::unistd::getuid().as_raw()));
        for dir in runtime.into_iter().chain([user_run]) {
            if dir.is_dir() && !r.hidden_dirs.contains(&dir) {
                r.hidden_dirs.push(dir);
            }
        }
        let bin_dir = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(canonical));
        r.read_only.extend(bin_dir.clone());
        if let Some(path) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&path).filter(|d| d.is_absolute() && d.is_dir()) {
                let dir = canonical(&dir);
                if dir.parent().is_some() && !r.read_only.contains(&dir) {
                    r.read_only.push(dir);
                }
            }
        }
        r.writable.push(workspace.clone());
        r.writable.extend(super::git::metadata_dirs(&workspace));
        if let Some(file) = env_path("CLANKIE_CREDENTIALS_FILE") {
            r.hide(&canonical(&file));
        }
        for socket in sockets {
            r.hide(&canonical(socket));
        }
        for p in profiles {
            let p = canonical(p);
            r.check_profile(&p, bin_dir.as_deref())?;
            if !r.writable.contains(&p) {
                r.writable.push(p);
            }
        }
        Ok(r)
    }

    /// A profile folder must be an existing folder that holds nothing the
    /// hire must not change or see, and lies inside neither the state nor
    /// the stack's binaries.
    fn check_profile(&self, p: &Path, bin_dir: Option<&Path>) -> Result<(), ClankieError> {
        let refuse = |why: &str| {
            Err(ErrorCode::InvalidArgument.err(format!(
                "the profile folder {} {why}; a sandboxed hire may not write there",
                p.display()
            )))
        };
        if !p.is_absolute() || !p.is_dir() {
            return refuse("is not an existing folder");
        }
        if SHARED.iter().any(|s| p == Path::new(s)) {
            return refuse("is shared by everything on this machine");
        }
        if p.starts_with(&self.state_root) || bin_dir.is_some_and(|b| p.starts_with(b)) {
            return refuse("lies inside the stack's state or binaries");
        }
        let guarded = std::iter::once(&self.state_root)
            .chain(&self.hidden_dirs)
            .chain(&self.hidden_files)
            .chain(&self.read_only);
        for g in guarded {
            if g.starts_with(p) {
                return refuse("holds a folder the hire must not change");
            }
        }
        Ok(())
    }

    /// Hides `file`: its whole folder when that folder is its own (a
    /// multiplexer's socket folder, a credentials folder), else the file.
    pub fn hide(&mut self, file: &Path) {
        let home = env_path("HOME").map(|h| canonical(&h));
        let shared = |dir: &Path| {
            SHARED.iter().any(|s| dir == Path::new(s))
                || home.as_deref() == Some(dir)
                || self.writable.iter().any(|w| w.starts_with(dir))
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

    /// Creates the folders the sandbox masks, so a mask always has a mount
    /// point: a credentials folder made later would otherwise show through.
    pub fn prepare(&self) -> std::io::Result<()> {
        for d in &self.hidden_dirs {
            if !d.exists() {
                crate::state::private_dir(d)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_in_its_own_folder_hides_the_folder_and_one_in_tmp_only_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let own = dir.path().join("tmux-0");
        std::fs::create_dir_all(&own).expect("mkdir");
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(&workspace).expect("mkdir");
        let mut r = Reach {
            state_root: dir.path().join("state"),
            writable: vec![workspace.clone()],
            ..Default::default()
        };
        r.hide(&own.join("default"));
        r.hide(Path::new("/tmp/herdr.sock"));
        r.hide(&workspace.join("app.sock"));
        assert_eq!(r.hidden_dirs, vec![own]);
        assert_eq!(
            r.hidden_files,
            vec![PathBuf::from("/tmp/herdr.sock"), workspace.join("app.sock")]
        );
    }

    #[test]
    fn a_profile_that_holds_or_lies_in_what_is_guarded_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = canonical(dir.path());
        let state = root.join("home/.clankie");
        let profile = root.join("home/.pi");
        let bin = root.join("bin");
        for d in [&state, &profile, &bin] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let r = Reach {
            state_root: state.clone(),
            read_only: vec![bin.clone()],
            ..Default::default()
        };
        assert!(r.check_profile(&profile, Some(&bin)).is_ok());
        for bad in [
            root.join("home"),
            state.join("x"),
            bin.clone(),
            root.join("missing"),
            PathBuf::from("/tmp"),
        ] {
            let _ = std::fs::create_dir_all(state.join("x"));
            assert!(
                r.check_profile(&bad, Some(&bin)).is_err(),
                "{} was accepted",
                bad.display()
            );
        }
    }
}
