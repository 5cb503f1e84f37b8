//! Claude Code as a harness: which release is installed, the hire's own
//! profile (a `CLAUDE_CONFIG_DIR` with the Clankie worker plugin installed
//! from its local marketplace and its channel approved), and the pane
//! command. The owner's own `~/.claude` and `~/.claude.json` are never
//! written.
//!
//! What a profile holds, and why (observed on 2.1.332, see
//! `integrations/claude-plugin/README.md`):
//! - `.claude.json`: onboarding done (else an interactive first run exits,
//!   unable to reach its service), each workspace trusted (else a trust
//!   dialog waits), the marketplace auto-install spent, and the channel
//!   feature with the plugin on its ledger (`cachedGrowthBookFeatures`), so
//!   `--channels plugin:clankie-worker@clankie` runs with no confirmation;
//! - `settings.json`: the plugin enabled, its tools allowed, and the
//!   model-provider environment the owner runs with, so no variable (a key
//!   among them) rides on the pane's command line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use super::harness::{Installed, merge_json, run_bounded};

/// The oldest release whose channels, plugin and MCP behaviour were tested.
pub const OLDEST: (u64, u64, u64) = (2, 1, 332);
/// The plugin's id in its marketplace.
pub const PLUGIN: &str = "clankie-worker@clankie";
/// The MCP server name Claude gives the plugin's bridge: its tools are
/// `mcp__plugin_clankie-worker_clankie__<tool>`.
pub const SERVER: &str = "mcp__plugin_clankie-worker_clankie";

/// Environment the owner's Claude runs with that a hired Claude needs too:
/// the provider (`ANTHROPIC_*`), Claude Code's switches, and tool search.
fn carried(key: &str) -> bool {
    key.starts_with("ANTHROPIC_")
        || key.starts_with("CLAUDE_CODE_")
        || key.starts_with("DISABLE_")
        || key == "ENABLE_TOOL_SEARCH"
        || key == "MAX_MCP_OUTPUT_TOKENS"
}

/// An installed Claude Code.
#[derive(Debug, Clone)]
pub struct Claude {
    installed: Installed,
}

impl Claude {
    /// `--claude PATH`, else `claude` on PATH; its release from
    /// `claude --version` (`2.1.332 (Claude Code)`).
    pub async fn find(chosen: Option<&Path>) -> anyhow::Result<Claude> {
        Ok(Claude {
            installed: Installed::find("claude", chosen, 0).await?,
        })
    }

    /// Refuses a release older than the tested one.
    pub fn accepted(&self) -> anyhow::Result<()> {
        self.installed.accepted("claude", OLDEST)
    }

    fn command(&self, profile: &Path) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.installed.bin);
        cmd.env("CLAUDE_CONFIG_DIR", profile)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .stdin(std::process::Stdio::null());
        cmd
    }

    /// Whether `profile` has the worker plugin installed already.
    pub fn prepared(profile: &Path) -> bool {
        std::fs::read_to_string(profile.join("plugins/installed_plugins.json"))
            .is_ok_and(|t| t.contains(PLUGIN))
    }

    /// Trusts `workspaces` in a prepared profile, changing nothing else.
    pub fn trust(profile: &Path, workspaces: &[String]) -> anyhow::Result<()> {
        let trusted: serde_json::Map<String, Value> = workspaces
            .iter()
            .map(|w| (w.clone(), json!({ "hasTrustDialogAccepted": true })))
            .collect();
        merge_json(
            &profile.join(".claude.json"),
            &json!({ "projects": trusted }),
        )
    }

    /// Makes `profile` a hire's Claude profile: the worker plugin installed
    /// from `marketplace`, the workspaces trusted, the channel approved.
    pub async fn prepare(
        &self,
        profile: &Path,
        marketplace: &Path,
        workspaces: &[String],
    ) -> anyhow::Result<()> {
        clankie_runtime::state::private_dir(profile)?;
        if !Self::prepared(profile) {
            for args in [
                vec![
                    "plugin".to_string(),
                    "marketplace".into(),
                    "add".into(),
                    marketplace.display().to_string(),
                ],
                vec!["plugin".into(), "install".into(), PLUGIN.into()],
            ] {
                run_bounded(self.command(profile).args(&args), Duration::from_secs(60))
                    .await
                    .map_err(|e| {
                        anyhow::anyhow!("claude_profile_failed: claude {}: {e}", args.join(" "))
                    })?;
            }
        }
        Self::trust(profile, workspaces)?;
        merge_json(
            &profile.join(".claude.json"),
            &json!({
                "hasCompletedOnboarding": true,
                "officialMarketplaceAutoInstallAttempted": true,
                "officialMarketplaceAutoInstallNextRetryTime": 9_999_999_999_999_u64,
                "cachedGrowthBookFeatures": {
                    "tengu_harbor": true,
                    "tengu_harbor_ledger": [{ "marketplace": "clankie", "plugin": "clankie-worker" }],
                },
            }),
        )?;
        let mut env: serde_json::Map<String, Value> = std::env::vars()
            .filter(|(k, _)| carried(k))
            .map(|(k, v)| (k, json!(v)))
            .collect();
        env.insert(
            "CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF".into(),
            json!("1"),
        );
        merge_json(
            &profile.join("settings.json"),
            &json!({
                "env": env,
                "enabledPlugins": { PLUGIN: true },
                "permissions": { "allow": [SERVER] },
            }),
        )
    }

    /// The pane command of a hire: the exact launcher, `clankie claude`,
    /// with the hire's profile and this very Claude. Admission's launcher
    /// proof and the hire's harness binding compare against exactly this.
    pub fn pane_command(
        &self,
        profile: &Path,
        model: Option<&str>,
        args: &[String],
    ) -> anyhow::Result<Vec<String>> {
        let clankie = std::env::current_exe().context("where is this binary")?;
        let mut cmd = vec![
            clankie.display().to_string(),
            "claude".into(),
            "--profile".into(),
            profile.display().to_string(),
            "--claude".into(),
            self.executable().display().to_string(),
        ];
        if let Some(m) = model {
            cmd.push("--model".into());
            cmd.push(m.into());
        }
        cmd.push("--".into());
        cmd.extend(args.iter().cloned());
        Ok(cmd)
    }

    /// The executable as the kernel will name the running Claude: the
    /// installed file with its links resolved.
    pub fn executable(&self) -> PathBuf {
        std::fs::canonicalize(&self.installed.bin).unwrap_or_else(|_| self.installed.bin.clone())
    }

    /// Claude in `profile` with the plugin's channel, for the launcher to
    /// start as its child: the bridge's binary for the plugin's `.mcp.json`
    /// and the profile ride in its environment, not on a command line.
    pub fn launch(
        &self,
        profile: &Path,
        model: Option<&str>,
        args: &[String],
    ) -> anyhow::Result<tokio::process::Command> {
        let clankie = std::env::current_exe().context("where is this binary")?;
        let mut cmd = tokio::process::Command::new(self.executable());
        cmd.env("CLAUDE_CONFIG_DIR", profile)
            .env("CLANKIE_BIN", clankie)
            .env("CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF", "1");
        if let Some(m) = model {
            cmd.arg("--model").arg(m);
        }
        // `--channels` takes every word after it up to the next option, so
        // it goes last: a prompt among `args` stays a prompt.
        cmd.args(args)
            .arg("--channels")
            .arg(format!("plugin:{PLUGIN}"));
        Ok(cmd)
    }
}

/// The plugin's local marketplace: beside the binaries in a release
/// (`claude-plugin/`), else in the source tree this binary was built from.
pub fn marketplace_dir() -> anyhow::Result<PathBuf> {
    super::harness::integration_dir(
        "CLANKIE_CLAUDE_PLUGIN_DIR",
        "claude-plugin",
        ".claude-plugin/marketplace.json",
    )
}
