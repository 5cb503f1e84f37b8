//! Local fleet admission end to end: a bridge inside a pane of a linked tmux
//! session reaches the tools with no token; the same bridge elsewhere is
//! refused; a pane that goes away loses its proof.

use std::time::Duration;

use clankie_tests::{Stack, bin_dir, file_lines, peer_path, python, repo_root};
use serde_json::Value;

struct Tmux {
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tmx")
            .tempdir_in("/tmp")
            .expect("tmp");
        let socket = dir.path().join("tmux.sock");
        let t = Tmux { socket, _dir: dir };
        t.run(&["new-session", "-d", "-s", "work", "-x", "120", "-y", "30"]);
        t
    }

    fn run(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

async fn wait_file(path: &std::path::Path, timeout: Duration) -> Option<Value> {
    let end = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < end {
        if let Ok(bytes) = std::fs::read(path) {
            return serde_json::from_slice(&bytes).ok();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bridge_in_a_linked_pane_needs_no_token_and_one_outside_is_refused() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let tmux = Tmux::start();
    let socket = tmux.socket.display().to_string();
    let out = stack.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    assert!(out.contains("linked tmux"), "{out}");

    // Inside a pane: the pane's process runs the MCP client, which runs the bridge.
    let result = stack.state.path().join("inside.json");
    let command = format!(
        "exec env CLANKIE_STATE={state} PATH={path} {py} {script} {clankie} {out}",
        state = stack.state.path().display(),
        path = peer_path(),
        py = python().display(),
        script = repo_root().join("tests/clients/local_call.py").display(),
        clankie = bin_dir().join("clankie").display(),
        out = result.display(),
    );
    let pane = tmux.run(&[
        "split-window",
        "-t",
        "work",
        "-P",
        "-F",
        "#{pane_id}",
        &command,
    ]);
    let seen = wait_file(&result, Duration::from_secs(60))
        .await
        .expect("the pane's client finished");
    assert_eq!(
        seen["tools"],
        serde_json::json!(["clankie_call", "clankie_tools"]),
        "{seen}"
    );
    assert_eq!(seen["call"]["outcome"], "ok", "{seen}");
    let audit = file_lines(&stack.state.path().join("audit/connected-calls.jsonl"));
    assert!(
        audit
            .iter()
            .any(|l| l.contains(&format!("fleet:local:pane:{pane}"))),
        "the principal names the proven pane: {audit:?}"
    );

    // Outside any pane: the same client, run by the test itself, is refused.
    let outside = stack.state.path().join("outside.json");
    let status = std::process::Command::new(python())
        .arg(repo_root().join("tests/clients/local_call.py"))
        .arg(bin_dir().join("clankie"))
        .arg(&outside)
        .env("CLANKIE_STATE", stack.state.path())
        .env("PATH", peer_path())
        .env("RUST_LOG", "warn")
        .status()
        .expect("outside client");
    assert!(status.success());
    let seen: Value =
        serde_json::from_slice(&std::fs::read(&outside).expect("outside result")).expect("json");
    assert!(seen.get("tools").is_none(), "{seen}");
    assert_eq!(seen["isError"], true);
    assert_eq!(
        seen["call"]["error"]["code"], "local_process_membership_required",
        "{seen}"
    );
    assert_eq!(
        file_lines(&stack.state.path().join("audit/connected-calls.jsonl"))
            .iter()
            .filter(|l| l.contains("\"dispatch\""))
            .count(),
        1,
        "nothing was forwarded for the refused client"
    );
}
