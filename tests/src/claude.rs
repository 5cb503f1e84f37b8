//! The Claude Code scenarios' fixture: the real Claude Code from
//! `target/peers/claude/`, pointed at the scripted model
//! ([`crate::model`]) through the environment `clankie hire --harness
//! claude` carries into the hire's own profile, in a pane of a linked tmux
//! session.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::model::Model;
use crate::seat::json_of;
use crate::{Stack, TmuxServer, peers};

pub const VERSION: &str = "2.1.332";

pub fn claude_bin() -> PathBuf {
    peers().join(format!("claude/{VERSION}/node_modules/.bin/claude"))
}

/// The provider and switches a hired Claude runs with: the scripted model,
/// no network, every tool listed (no tool search).
pub fn provider_env(model: &Model) -> Vec<(String, String)> {
    [
        (
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", model.port),
        ),
        ("ANTHROPIC_AUTH_TOKEN", "offline".into()),
        ("ANTHROPIC_MODEL", "claude-scripted".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("CLAUDE_CODE_MODEL_CATALOG", "off".into()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".into()),
        ("ENABLE_TOOL_SEARCH", "false".into()),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .to_vec()
}

/// A hired Claude Code worker.
pub struct ClaudeWorker {
    pub hire: Value,
    pub profile: PathBuf,
}

impl ClaudeWorker {
    /// Hires Claude into the linked session with a profile under `dir`.
    pub fn hire(stack: &Stack, dir: &Path, model: &Model, lead: &str, name: &str) -> ClaudeWorker {
        let profile = dir.join(format!("claude-{name}"));
        std::fs::create_dir_all(&profile).expect("profile");
        let mut cmd = stack.clankie_cmd(&[
            "hire",
            "--project",
            "alpha",
            "--conversation",
            lead,
            "--harness",
            "claude",
            "--wait-ready",
            "120",
            "--claude",
            &claude_bin().display().to_string(),
            "--profile",
            &profile.display().to_string(),
        ]);
        cmd.envs(provider_env(model));
        let out = cmd.output().expect("hire");
        assert!(
            out.status.success(),
            "hire --harness claude failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ClaudeWorker {
            hire: json_of(&String::from_utf8_lossy(&out.stdout)),
            profile,
        }
    }

    pub fn hire_id(&self) -> &str {
        self.hire["hireId"].as_str().expect("hire id")
    }

    pub fn pane(&self) -> &str {
        self.hire["paneId"].as_str().expect("pane")
    }
}

/// A stack with a linked tmux session, project `alpha`, a lead and the
/// scripted model.
pub struct ClaudeStack {
    pub stack: Stack,
    pub tmux: TmuxServer,
    /// Project `alpha`'s workspace.
    pub workspace: PathBuf,
    pub lead: String,
    pub dir: tempfile::TempDir,
    pub model: Model,
}

impl ClaudeStack {
    pub async fn start() -> ClaudeStack {
        let dir = tempfile::tempdir().expect("dir");
        let workspace = dir.path().join("alpha");
        std::fs::create_dir_all(&workspace).expect("workspace");
        Self::start_on(dir, workspace, &[]).await
    }

    /// With project `alpha` on `workspace` (under `dir`), with more
    /// `project add` flags.
    pub async fn start_on(
        dir: tempfile::TempDir,
        workspace: PathBuf,
        flags: &[&str],
    ) -> ClaudeStack {
        let stack = Stack::start().await.expect("stack");
        let tmux = stack.link_tmux("work");
        let ws = workspace.display().to_string();
        let mut args = vec!["project", "add", "alpha", "--workspace", &ws];
        args.extend_from_slice(flags);
        stack.clankie_ok(&args);
        let lead = stack.add_lead("Lead");
        let model = Model::start(dir.path()).await;
        ClaudeStack {
            stack,
            tmux,
            workspace,
            lead,
            dir,
            model,
        }
    }

    pub fn hire(&self, name: &str) -> ClaudeWorker {
        ClaudeWorker::hire(&self.stack, self.dir.path(), &self.model, &self.lead, name)
    }

    /// The lead's message to a worker (the model's script).
    pub fn brief(&self, worker: &ClaudeWorker, lines: &[&str]) -> String {
        let sent = json_of(&self.stack.clankie_ok(&[
            "message",
            worker.hire_id(),
            &lines.join("\n"),
            "--conversation",
            &self.lead,
        ]));
        sent["deliveryId"].as_str().expect("delivery").to_string()
    }

    /// The lead's first transcript entry whose text holds `needle`.
    pub async fn lead_hears(&self, needle: &str, within: Duration) -> Option<Value> {
        crate::pi::lead_hears(&self.stack, &self.lead, needle, within).await
    }

    /// What the worker's pane shows, for a failure message.
    pub fn screen(&self, worker: &ClaudeWorker) -> String {
        self.tmux.run(&["capture-pane", "-p", "-t", worker.pane()])
    }
}
