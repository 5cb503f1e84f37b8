//! A private tmux server with one session, and process facts the
//! scenarios read about its panes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::*;

/// A private tmux server (its own socket) with one session; killed on drop.
pub struct TmuxServer {
    pub socket: PathBuf,
    user: Option<Account>,
    _dir: tempfile::TempDir,
}

impl TmuxServer {
    /// Starts a server with a detached session named `session`.
    pub fn start(session: &str) -> Self {
        Self::start_as(session, None)
    }

    /// Starts a server run by `user` (None: the test's own account).
    pub fn start_as(session: &str, user: Option<&Account>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tmx")
            .tempdir_in("/tmp")
            .expect("tmp");
        if let Some(user) = user {
            user.own(dir.path());
        }
        let server = TmuxServer {
            socket: dir.path().join("tmux.sock"),
            user: user.cloned(),
            _dir: dir,
        };
        server.run(&["new-session", "-d", "-s", session, "-x", "120", "-y", "30"]);
        server
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket);
        if let Some(user) = &self.user {
            user.apply(&mut cmd);
        }
        cmd
    }

    /// Runs a tmux command against this server; requires success.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self
            .command()
            .args(args)
            .output()
            .expect("tmux (scripts/install-peers installs it)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Stops the server (its socket file stays).
    pub fn kill(&self) {
        let _ = self.command().arg("kill-server").status();
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The parent pid of `pid`, from `/proc/PID/stat` (0 when unknown).
pub fn ppid(pid: i32) -> i32 {
    Stack::ppid(Path::new(&format!("/proc/{pid}")))
}
