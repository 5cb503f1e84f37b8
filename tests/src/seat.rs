//! A hired seat driven through files: the shared harness of the seat
//! scenarios (peer messages, reviews, the trust boundary).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::{Stack, TmuxServer};

/// A hired seat in a real pane of a linked tmux session, running the real
/// bridge under `tests/clients/peer_seat.py`, driven through files.
pub struct PeerSeat {
    pub dir: PathBuf,
    pub name: String,
    /// The hire record `clankie hire` printed.
    pub hire: Value,
    next: AtomicUsize,
}

/// Parses a command's JSON output.
pub fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

pub async fn try_wait_json(path: &std::path::Path, timeout: Duration) -> Option<Value> {
    crate::wait_json(path, timeout).await
}

/// Waits for a JSON file, panicking after `timeout`.
pub async fn must_wait_json(path: &std::path::Path, timeout: Duration) -> Value {
    try_wait_json(path, timeout)
        .await
        .unwrap_or_else(|| panic!("timed out waiting for {}", path.display()))
}

impl PeerSeat {
    pub async fn hire(stack: &Stack, dir: &std::path::Path, name: &str, lead: &str) -> PeerSeat {
        Self::hire_as(stack, dir, name, lead, "worker").await
    }

    pub async fn hire_as(
        stack: &Stack,
        dir: &std::path::Path,
        name: &str,
        lead: &str,
        role: &str,
    ) -> PeerSeat {
        Self::hire_with(stack, dir, name, lead, role, "").await
    }

    /// A hire in a given linked session (`link`: its link id, or "").
    pub async fn hire_with(
        stack: &Stack,
        dir: &std::path::Path,
        name: &str,
        lead: &str,
        role: &str,
        link: &str,
    ) -> PeerSeat {
        let hire = stack.hire_harness(
            &[
                "--project",
                "alpha",
                "--conversation",
                lead,
                "--role",
                role,
                "--link",
                link,
            ],
            "peer_seat.py",
            dir,
            name,
        );
        let seat = PeerSeat {
            dir: dir.to_path_buf(),
            name: name.into(),
            hire,
            next: AtomicUsize::new(0),
        };
        if try_wait_json(&seat.file("seat"), Duration::from_secs(60))
            .await
            .is_none()
        {
            let logs = stack.log_tails(&["gateway", "mailbox", "admission"], 30);
            panic!("seat {name} never came up\n{logs}");
        }
        seat
    }

    pub fn file(&self, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}.{suffix}", self.name))
    }

    pub fn seat_id(&self) -> String {
        let v: Value =
            serde_json::from_slice(&std::fs::read(self.file("seat")).expect("seat")).expect("json");
        v["seatId"].as_str().expect("seat id").to_string()
    }

    pub async fn run(&self, cmd: Value) -> Value {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let tmp = self.file(&format!("cmd.{n}.tmp"));
        std::fs::write(&tmp, cmd.to_string()).expect("cmd");
        std::fs::rename(&tmp, self.file(&format!("cmd.{n}"))).expect("rename");
        must_wait_json(&self.file(&format!("res.{n}")), Duration::from_secs(60)).await
    }

    pub async fn call(&self, tool: &str, args: Value) -> Value {
        self.run(json!({ "tool": tool, "args": args })).await
    }

    pub async fn receipt(&self, id: &str) -> Value {
        self.run(json!({ "http": ["GET", format!("/v1/fleet/seats/{{pane}}/peer-messages/{id}"), null] }))
            .await
    }

    pub fn inbox(&self) -> Vec<Value> {
        std::fs::read_to_string(self.file("inbox"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub async fn wait_inbox_containing(&self, needle: &str) {
        for _ in 0..600 {
            if self
                .inbox()
                .iter()
                .any(|m| m["content"].as_str().is_some_and(|c| c.contains(needle)))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "{} never received {needle:?}: {:?}",
            self.name,
            self.inbox()
        );
    }

    pub async fn wait_inbox(&self, content: &str) {
        for _ in 0..600 {
            if self.inbox().iter().any(|m| m["content"] == content) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "{} never received {content:?}: {:?}",
            self.name,
            self.inbox()
        );
    }

    /// The seat's bridge process (the harness's `clankie mcp --fleet` child).
    pub fn bridge(&self, tmux: &TmuxServer) -> Pid {
        let pane = self.hire["paneId"].as_str().expect("pane");
        let harness: i32 = tmux
            .run(&["display-message", "-p", "-t", pane, "#{pane_pid}"])
            .parse()
            .expect("pane pid");
        let children = Stack::children_matching(harness, "mcp");
        Pid::from_raw(*children.first().expect("bridge process"))
    }
}
