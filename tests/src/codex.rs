//! The Codex scenarios' fixture: the real Codex CLI from
//! `target/peers/codex/`, whose hire profile starts from a `config.toml`
//! naming the scripted model ([`crate::model`]) as its provider, in a pane
//! of a linked tmux session.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Stack;
use crate::model::Model;
use crate::peers;
use crate::seat::json_of;

pub const VERSION: &str = "0.169.0";

pub fn codex_bin() -> PathBuf {
    peers().join(format!("codex/{VERSION}/node_modules/.bin/codex"))
}

/// What an owner's `config.toml` for a local provider holds: the scripted
/// model over the Responses API, no login, nothing reached for online.
pub fn provider_config(model: &Model) -> String {
    format!(
        r#"model = "scripted"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.scripted]
name = "scripted"
base_url = "http://127.0.0.1:{}/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
unbounded_connection_retries = false

[analytics]
enabled = false

[feedback]
enabled = false
"#,
        model.port
    )
}

/// A hired Codex worker.
pub struct CodexWorker {
    pub hire: Value,
    pub profile: PathBuf,
}

impl CodexWorker {
    /// Hires Codex with a profile under `dir` and `prompt` as its first
    /// turn (one line: the script's steps joined by ` ;; `).
    pub fn hire(
        stack: &Stack,
        dir: &Path,
        model: &Model,
        lead: &str,
        name: &str,
        prompt: &str,
    ) -> CodexWorker {
        Self::hire_as(stack, dir, model, lead, name, "worker", prompt)
    }

    /// The same, in `role` (worker, reviewer or lead).
    pub fn hire_as(
        stack: &Stack,
        dir: &Path,
        model: &Model,
        lead: &str,
        name: &str,
        role: &str,
        prompt: &str,
    ) -> CodexWorker {
        let profile = dir.join(format!("codex-{name}"));
        std::fs::create_dir_all(&profile).expect("profile");
        std::fs::write(profile.join("config.toml"), provider_config(model)).expect("config");
        let out = stack.clankie(&[
            "hire",
            "--project",
            "alpha",
            "--conversation",
            lead,
            "--role",
            role,
            "--harness",
            "codex",
            "--wait-ready",
            "120",
            "--codex",
            &codex_bin().display().to_string(),
            "--profile",
            &profile.display().to_string(),
            "--",
            prompt,
        ]);
        assert!(
            out.status.success(),
            "hire --harness codex failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        CodexWorker {
            hire: json_of(&String::from_utf8_lossy(&out.stdout)),
            profile,
        }
    }

    pub fn pane(&self) -> &str {
        self.hire["paneId"].as_str().expect("pane")
    }

    pub fn hire_id(&self) -> &str {
        self.hire["hireId"].as_str().expect("hire id")
    }
}

/// The app-server daemon Codex started for this hire's home outlives the
/// pane: a scenario stops it, as `clankie close` does.
impl Drop for CodexWorker {
    fn drop(&mut self) {
        let packages = self.profile.join("packages");
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if std::fs::read_link(entry.path().join("exe")).is_ok_and(|e| e.starts_with(&packages))
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}
