//! A hired seat driven through files: the one seat fixture of the
//! scenarios (peer messages, reviews, the trust boundary, the tracker's
//! roles, Auto's wakes).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::{Stack, TmuxServer};

/// Which Python harness runs in a seat's pane (both from `tests/clients/`,
/// both speaking the file protocol of `tests/harness/seat_files.py`).
#[derive(Clone, Copy, Debug)]
pub enum Harness {
    /// `peer_seat.py`: records channel deliveries in NAME.inbox and runs
    /// tool calls and local-socket requests; up once NAME.seat exists.
    Peer,
    /// `tracker_seat.py`: `clankie_tools` and (batches of) `clankie_call`;
    /// up once NAME.ready exists.
    Tracker,
}

impl Harness {
    fn script(self) -> &'static str {
        match self {
            Harness::Peer => "peer_seat.py",
            Harness::Tracker => "tracker_seat.py",
        }
    }

    /// The file the harness writes once its bridge answers.
    fn ready_file(self) -> &'static str {
        match self {
            Harness::Peer => "seat",
            Harness::Tracker => "ready",
        }
    }
}

/// A hired seat in a real pane of a linked tmux session, running the real
/// bridge under a Python harness, driven through files: the one seat
/// fixture of the scenario tests.
pub struct Seat {
    pub dir: PathBuf,
    pub name: String,
    /// The hire record `clankie hire` printed.
    pub hire: Value,
    /// What the harness wrote once it was up.
    pub ready: Value,
    next: AtomicUsize,
}

/// Parses a command's JSON output.
pub fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Waits for a JSON file.
pub async fn try_wait_json(path: &std::path::Path, timeout: Duration) -> Option<Value> {
    crate::wait_json(path, timeout).await
}

/// Waits for a JSON file, panicking after `timeout`.
pub async fn must_wait_json(path: &std::path::Path, timeout: Duration) -> Value {
    try_wait_json(path, timeout)
        .await
        .unwrap_or_else(|| panic!("timed out waiting for {}", path.display()))
}

impl Seat {
    /// Hires `harness` with these `clankie hire` flags and waits until it is up.
    pub async fn start(
        stack: &Stack,
        dir: &std::path::Path,
        name: &str,
        harness: Harness,
        flags: &[&str],
    ) -> Seat {
        let hire = stack.hire_harness(flags, harness.script(), dir, name);
        let ready = dir.join(format!("{name}.{}", harness.ready_file()));
        let Some(ready) = try_wait_json(&ready, Duration::from_secs(60)).await else {
            let logs =
                stack.log_tails(&["gateway", "mailbox", "admission", "mcp-host", "auto"], 20);
            panic!("seat {name} never came up\n{logs}");
        };
        Seat {
            dir: dir.to_path_buf(),
            name: name.into(),
            hire,
            ready,
            next: AtomicUsize::new(0),
        }
    }

    /// A seat started by hand: the harness run in a new window of `tmux`
    /// (a linked session), told only where the gateway's discovery file
    /// is, with no hire behind it.
    pub async fn by_hand(
        stack: &Stack,
        tmux: &TmuxServer,
        dir: &std::path::Path,
        name: &str,
    ) -> Seat {
        let script = crate::repo_root().join("tests/clients/peer_seat.py");
        let line = format!(
            "exec env CLANKIE_GATEWAY_DISCOVERY={} {} {} {} {} {name}",
            stack.state.path().join("run/fleet/gateway.json").display(),
            crate::python().display(),
            script.display(),
            crate::bin_dir().join("clankie").display(),
            dir.display(),
        );
        tmux.run(&["new-window", "-d", &line]);
        let ready = dir.join(format!("{name}.seat"));
        let Some(ready) = try_wait_json(&ready, Duration::from_secs(60)).await else {
            let logs = stack.log_tails(&["gateway", "mailbox", "admission"], 20);
            panic!("seat {name} never came up\n{logs}");
        };
        Seat {
            dir: dir.to_path_buf(),
            name: name.into(),
            hire: Value::Null,
            ready,
            next: AtomicUsize::new(0),
        }
    }

    /// A worker of project `alpha` under conversation `lead`.
    pub async fn hire(stack: &Stack, dir: &std::path::Path, name: &str, lead: &str) -> Seat {
        Self::hire_as(stack, dir, name, lead, "worker").await
    }

    pub async fn hire_as(
        stack: &Stack,
        dir: &std::path::Path,
        name: &str,
        lead: &str,
        role: &str,
    ) -> Seat {
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
    ) -> Seat {
        let flags = [
            "--project",
            "alpha",
            "--conversation",
            lead,
            "--role",
            role,
            "--link",
            link,
        ];
        Self::start(stack, dir, name, Harness::Peer, &flags).await
    }

    pub fn file(&self, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}.{suffix}", self.name))
    }

    pub fn seat_id(&self) -> String {
        let v: Value =
            serde_json::from_slice(&std::fs::read(self.file("seat")).expect("seat")).expect("json");
        v["seatId"].as_str().expect("seat id").to_string()
    }

    /// Drops command N (written whole) and returns N.
    pub fn send(&self, cmd: Value) -> usize {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let tmp = self.file(&format!("cmd.{n}.tmp"));
        std::fs::write(&tmp, cmd.to_string()).expect("cmd");
        std::fs::rename(&tmp, self.file(&format!("cmd.{n}"))).expect("rename");
        n
    }

    /// The answer to command N.
    pub async fn result(&self, n: usize) -> Value {
        must_wait_json(&self.file(&format!("res.{n}")), Duration::from_secs(90)).await
    }

    pub async fn run(&self, cmd: Value) -> Value {
        let n = self.send(cmd);
        self.result(n).await
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

    /// Whether a delivery whose content contains `needle` arrives within
    /// `within`.
    pub async fn inbox_contains(&self, needle: &str, within: Duration) -> bool {
        let has = |m: &Value| m["content"].as_str().is_some_and(|c| c.contains(needle));
        crate::eventually(within, async || self.inbox().iter().any(has).then_some(()))
            .await
            .is_some()
    }

    pub async fn wait_inbox_containing(&self, needle: &str) {
        if !self.inbox_contains(needle, Duration::from_secs(30)).await {
            panic!(
                "{} never received {needle:?}: {:?}",
                self.name,
                self.inbox()
            );
        }
    }

    pub async fn wait_inbox(&self, content: &str) {
        let has = |m: &Value| m["content"] == content;
        if crate::eventually(Duration::from_secs(30), async || {
            self.inbox().iter().any(has).then_some(())
        })
        .await
        .is_none()
        {
            panic!(
                "{} never received {content:?}: {:?}",
                self.name,
                self.inbox()
            );
        }
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
