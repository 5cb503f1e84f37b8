//! Pane hosts against the real multiplexer: a private tmux server.

use clankie_admission::panes::{PaneError, PaneHost, Tmux};

struct TmuxServer {
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TmuxServer {
    fn start(session: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tmx")
            .tempdir_in("/tmp")
            .expect("tmp");
        let socket = dir.path().join("tmux.sock");
        let ok = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["new-session", "-d", "-s", session, "-x", "80", "-y", "24"])
            .status()
            .expect("tmux (scripts/install-peers installs it)")
            .success();
        assert!(ok);
        TmuxServer { socket, _dir: dir }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

fn ppid(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(") ")
        .next()
        .and_then(|r| r.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn tmux_reports_each_panes_shell_and_forgets_closed_panes() {
    let server = TmuxServer::start("work");
    let other = server.tmux(&["new-session", "-d", "-s", "other", "-P", "-F", "#{pane_id}"]);
    let second = server.tmux(&[
        "split-window",
        "-t",
        "work",
        "-c",
        "/tmp",
        "-P",
        "-F",
        "#{pane_id}",
    ]);
    let host = Tmux {
        socket: server.socket.clone(),
        session: Some("work".into()),
    };
    let panes = host.panes().await.expect("panes");
    assert_eq!(panes.len(), 2, "only the linked session: {panes:?}");
    assert!(panes.iter().all(|p| p.session == "work"));
    assert!(!panes.iter().any(|p| p.pane_id == other));

    let pane = host.pane(&second).await.expect("pane");
    assert_eq!(pane.pane_id, second);
    // The shell is a real process, a child of the tmux server.
    let server_pid: i32 = server
        .tmux(&["display-message", "-p", "#{pid}"])
        .parse()
        .expect("pid");
    assert_eq!(ppid(pane.shell_pid), server_pid);
    assert!(!pane.command.is_empty());

    server.tmux(&["kill-pane", "-t", &second]);
    assert_eq!(host.pane(&second).await, Err(PaneError::NotFound));
    assert_eq!(host.pane("not-a-pane").await, Err(PaneError::NotFound));

    let gone = Tmux {
        socket: server.socket.with_file_name("nope.sock"),
        session: None,
    };
    assert!(matches!(gone.panes().await, Err(PaneError::Unavailable(_))));
}
