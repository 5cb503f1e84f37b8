//! The Herdr protocol fixture on a private socket.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::Value;

use crate::*;

/// The Herdr protocol fixture (`tests/peers/herdr_fixture.py`) on a private
/// socket: every request checked against the real schema.
pub struct HerdrFixture {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub violations: PathBuf,
    /// Mutating requests the fixture served, one JSON line each.
    pub acts: PathBuf,
    child: Child,
}

impl HerdrFixture {
    /// Starts the fixture with `panes` (a JSON map of pane id → shell pid)
    /// and, when given, a file holding the agent status it reports.
    pub async fn start(panes: &str, status_file: Option<&Path>) -> HerdrFixture {
        let env: Vec<(&str, &Path)> = status_file
            .map(|f| ("HERDR_FIXTURE_STATUS_FILE", f))
            .into_iter()
            .collect();
        Self::launch(panes, &env).await
    }

    /// Starts the fixture with `panes` whose foreground agents, as Herdr's
    /// detection would see them, are the JSON map in `agents` (pane id →
    /// agent).
    pub async fn start_seeing(panes: &str, agents: &Path) -> HerdrFixture {
        Self::launch(panes, &[("HERDR_FIXTURE_AGENTS_FILE", agents)]).await
    }

    async fn launch(panes: &str, env: &[(&str, &Path)]) -> HerdrFixture {
        let dir = tempfile::Builder::new()
            .prefix("hd")
            .tempdir_in("/tmp")
            .expect("tmp");
        let socket = dir.path().join("herdr.sock");
        let violations = dir.path().join("violations.log");
        let acts = dir.path().join("acts.log");
        let mut cmd = Command::new(python());
        cmd.arg(repo_root().join("tests/peers/herdr_fixture.py"))
            .arg(&socket)
            .arg(panes)
            .arg(&violations)
            .arg(&acts);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("herdr fixture");
        eventually(Duration::from_secs(5), async || {
            socket.exists().then_some(())
        })
        .await;
        HerdrFixture {
            dir,
            socket,
            violations,
            acts,
            child,
        }
    }

    /// The mutating requests served so far, parsed.
    pub fn acts_json(&self) -> Vec<Value> {
        file_lines(&self.acts)
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Stops the fixture and returns every schema violation it saw.
    pub fn stop(&mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        file_lines(&self.violations)
    }
}

impl Drop for HerdrFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
