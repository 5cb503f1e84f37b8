//! `clankie claude`: the exact Claude Code launcher. It prepares a profile
//! with the worker plugin's channel and runs Claude as its own direct child,
//! in its own process group: the pane's foreground group then holds this
//! launcher and Claude, and admission's launcher proof names Claude as the
//! seat's agent (the chain shell → `clankie claude` → Claude). A hire of
//! Claude runs exactly this command; a generic wrapper around Claude is
//! refused as `launcher_mismatch`.
//!
//! The launcher stays until Claude exits and leaves with its status. The
//! terminal's own signals (Ctrl-C, Ctrl-\) reach the whole foreground group,
//! Claude included, so the launcher only outlives them; a hang-up or
//! termination sent to the launcher alone is passed on to Claude.

use std::path::PathBuf;
use std::process::ExitCode;

use clankie_runtime::ErrorCode;
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use crate::support::claude::{self, Claude};

#[derive(Args)]
pub struct ClaudeArgs {
    /// The Claude Code executable (default: `claude` on PATH).
    #[arg(long)]
    pub claude: Option<PathBuf>,
    /// The profile (`CLAUDE_CONFIG_DIR`) to run in (default: a fresh one
    /// under `~/.local/share/clankie/profiles`).
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// The model Claude uses.
    #[arg(long)]
    pub model: Option<String>,
    /// Claude's own arguments, after `--`.
    #[arg(last = true)]
    pub args: Vec<String>,
}

pub async fn run(args: ClaudeArgs) -> anyhow::Result<ExitCode> {
    let claude = Claude::find(args.claude.as_deref()).await?;
    claude.accepted()?;
    let profile = match args.profile {
        Some(p) => p,
        None => crate::support::harness::fresh_profile("claude")?,
    };
    // The folder it starts in is trusted, so no dialog waits. A profile a
    // hire prepared keeps the provider settings it was given.
    let here = std::env::current_dir()?.display().to_string();
    if Claude::prepared(&profile) {
        Claude::trust(&profile, &[here])?;
    } else {
        claude
            .prepare(&profile, &claude::marketplace_dir()?, &[here])
            .await?;
    }
    let mut child = claude
        .launch(&profile, args.model.as_deref(), &args.args)?
        .spawn()
        .map_err(|e| ErrorCode::HarnessNotInstalled.err(format!("claude did not start: {e}")))?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut terminate = signal(SignalKind::terminate())?;
    // Caught, not ignored: an ignored signal would stay ignored in Claude.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut quit = signal(SignalKind::quit())?;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = hangup.recv() => pass_on(&child, nix::sys::signal::Signal::SIGHUP),
            _ = terminate.recv() => pass_on(&child, nix::sys::signal::Signal::SIGTERM),
            _ = interrupt.recv() => {}
            _ = quit.recv() => {}
        }
    };
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

fn pass_on(child: &tokio::process::Child, sig: nix::sys::signal::Signal) {
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}
