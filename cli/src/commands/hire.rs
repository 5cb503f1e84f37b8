//! `clankie hire` and `clankie close`: a hire into a new pane of a linked
//! session, and its close by the owning conversation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::ErrorCode;
use clankie_runtime::paths::StatePaths;
use clap::Args;

use crate::support::clients::{self, refused};
use crate::support::output::print_json;

use super::roster::hire_json;

#[derive(Args)]
pub struct HireArgs {
    /// Project name or id (a lead that owns one project may leave it out).
    #[arg(long, default_value = "")]
    pub project: String,
    /// The hire comes from an autonomous turn: the staffing rule applies.
    #[arg(long)]
    pub autonomous: bool,
    /// worker, reviewer or lead.
    #[arg(long, default_value = "worker")]
    pub role: String,
    /// The hiring conversation (default: the global head).
    #[arg(long, env = "CLANKIE_CONVERSATION_ID", default_value = "")]
    pub conversation: String,
    /// The linked session's link id, when several are linked.
    #[arg(long, default_value = "")]
    pub link: String,
    /// What runs in the pane: `command` (the command after `--`), `pi` (Pi
    /// with the worker extension), `claude` (Claude Code with the worker
    /// plugin's channel) or `codex` (Codex with the bridge registered), the
    /// last two in a profile of the hire's own; what follows `--` are then
    /// the harness's own arguments.
    #[arg(long, default_value = "command", value_parser = ["command", "pi", "claude", "codex"])]
    pub harness: String,
    /// Claude: its executable (default: `claude` on PATH).
    #[arg(long)]
    pub claude: Option<PathBuf>,
    /// Codex: its executable (default: `codex` on PATH).
    #[arg(long)]
    pub codex: Option<PathBuf>,
    /// Pi: its executable or package folder (default: `pi` on PATH).
    #[arg(long)]
    pub pi: Option<std::path::PathBuf>,
    /// Pi: the Node to run it with (default: `node` on PATH; Node 22).
    #[arg(long)]
    pub node: Option<std::path::PathBuf>,
    /// Pi: the model, as PROVIDER/MODEL.
    #[arg(long)]
    pub model: Option<String>,
    /// A folder the harness keeps its config and sessions in, writable
    /// under the worker sandbox (repeat for more). A Pi hire adds its
    /// profile (`PI_CODING_AGENT_DIR`, else `~/.pi/agent`); a Claude or
    /// Codex hire uses the first as its `CLAUDE_CONFIG_DIR` or `CODEX_HOME`
    /// (default: a fresh one under `~/.local/share/clankie/profiles`).
    #[arg(long = "profile", value_name = "DIR")]
    pub profiles: Vec<std::path::PathBuf>,
    /// Wait up to SECS for the hire's seat to be ready (its harness
    /// proven, its bridge offering what the fleet enables, a Claude's
    /// channel on); refused as `harness_not_ready` with the reason if not.
    #[arg(long, value_name = "SECS")]
    pub wait_ready: Option<u64>,
    /// The worker's command (or Pi's arguments), after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// What a hire starts in its pane: the command, the profile folders the
/// harness writes, and whether its control channel is the harness's own.
struct Pane {
    command: Vec<String>,
    /// The harness and its executable, as the kernel will name it.
    harness: (&'static str, String),
    profiles: Vec<PathBuf>,
    harness_only_control: bool,
}

/// The pane a hire runs. A harness is refused unless it is installed, its
/// release is accepted and (Pi) its probe passes.
async fn pane(paths: &StatePaths, args: &HireArgs) -> anyhow::Result<Pane> {
    let plain = |command: Vec<String>| Pane {
        command,
        harness: ("", String::new()),
        profiles: args.profiles.clone(),
        harness_only_control: false,
    };
    match args.harness.as_str() {
        "pi" => pi_pane(args).await,
        "claude" => claude_pane(paths, args).await,
        "codex" => codex_pane(paths, args).await,
        _ if args.command.is_empty() => {
            anyhow::bail!("give the worker's command after `--`, or --harness pi|claude|codex")
        }
        _ => Ok(plain(args.command.clone())),
    }
}

async fn pi_pane(args: &HireArgs) -> anyhow::Result<Pane> {
    use crate::support::pi;
    let package = pi::PiPackage::find(args.pi.as_deref())?;
    if let Err(why) = package.accepted() {
        return Err(ErrorCode::HarnessReleaseUnsupported
            .err(why.to_string())
            .into());
    }
    let node = pi::node(args.node.as_deref())?;
    let verdict = super::pi::probe(Some(&package.dir), Some(&node)).await;
    if verdict["ok"] != true {
        return Err(ErrorCode::HarnessProbeFailed
            .err(format!("Pi's probe refused the hire: {verdict}"))
            .into());
    }
    let worker = pi::worker_dir()?;
    let command = pi::pane_command(&pi::Launch {
        node: &node,
        package: &package,
        worker: &worker,
        model: args.model.as_deref(),
        pi_args: &args.command,
    })?;
    let mut profiles = args.profiles.clone();
    profiles.extend(pi::profile_dir());
    // Pi's extension holds the seat's control connection in Pi's own
    // process: nothing Pi starts may use it.
    Ok(Pane {
        command,
        harness: ("pi", String::new()),
        profiles,
        harness_only_control: true,
    })
}

/// The hire's own harness profile (the first `--profile`, else a fresh
/// one), and every profile folder the hire may write.
fn own_profile(args: &HireArgs, harness: &str) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    let profile = match args.profiles.first() {
        Some(p) => p.clone(),
        None => crate::support::harness::fresh_profile(harness)?,
    };
    let mut profiles = args.profiles.clone();
    if !profiles.contains(&profile) {
        profiles.push(profile.clone());
    }
    Ok((profile, profiles))
}

/// Claude Code in a profile of the hire's own, with the worker plugin's
/// channel.
async fn claude_pane(paths: &StatePaths, args: &HireArgs) -> anyhow::Result<Pane> {
    use crate::support::claude;
    let claude = claude::Claude::find(args.claude.as_deref()).await?;
    claude.accepted()?;
    let (profile, profiles) = own_profile(args, "claude")?;
    let workspaces = workspaces(paths, &args.project).await?;
    claude
        .prepare(&profile, &claude::marketplace_dir()?, &workspaces)
        .await?;
    Ok(Pane {
        command: claude.pane_command(&profile, args.model.as_deref(), &args.command)?,
        harness: ("claude", claude.executable().display().to_string()),
        profiles,
        harness_only_control: false,
    })
}

/// Codex in a home of the hire's own (a fresh one is seeded from the
/// owner's), with the bridge registered.
async fn codex_pane(paths: &StatePaths, args: &HireArgs) -> anyhow::Result<Pane> {
    use crate::support::codex;
    let codex = codex::Codex::find(args.codex.as_deref()).await?;
    codex.accepted()?;
    let (profile, profiles) = own_profile(args, "codex")?;
    codex.prepare(&profile, &workspaces(paths, &args.project).await?)?;
    Ok(Pane {
        command: codex.pane_command(&profile, args.model.as_deref(), &args.command),
        harness: ("codex", String::new()),
        profiles,
        harness_only_control: false,
    })
}

/// The workspace folders of this machine a hire into `project` may open in
/// (every project's, when none is named); another machine's are not here.
async fn workspaces(paths: &StatePaths, project: &str) -> anyhow::Result<Vec<String>> {
    let projects = clients::projects(&mut clients::mailbox(paths)?).await?;
    Ok(projects
        .into_iter()
        .filter(|p| project.is_empty() || p.name == project || p.project_id == project)
        .flat_map(|p| {
            p.workspaces
                .into_iter()
                .filter(|w| w.machine.is_empty())
                .map(|w| w.path)
        })
        .collect())
}

/// The profile folders, absolute.
fn absolute(dirs: &[PathBuf]) -> anyhow::Result<Vec<String>> {
    dirs.iter()
        .map(|d| {
            std::fs::canonicalize(d)
                .map(|d| d.display().to_string())
                .map_err(|e| anyhow::anyhow!("the profile folder {}: {e}", d.display()))
        })
        .collect()
}

pub async fn hire(paths: StatePaths, args: HireArgs) -> anyhow::Result<ExitCode> {
    let pane = pane(&paths, &args).await?;
    let h = clients::mailbox(&paths)?
        .hire(mailbox_pb::HireRequest {
            harness_only_control: pane.harness_only_control,
            profile: absolute(&pane.profiles)?,
            project: args.project,
            role: match clankie_types::Role::parse(&args.role) {
                Some(role) if role != clankie_types::Role::Owner => role.wire(),
                _ => anyhow::bail!("role {}: choose worker, reviewer or lead", args.role),
            },
            command: pane.command,
            conversation_id: args.conversation,
            link_id: args.link,
            workspace_id: String::new(),
            autonomous: args.autonomous,
            harness: pane.harness.0.into(),
            harness_executable: pane.harness.1,
        })
        .await
        .map_err(refused)?
        .into_inner();
    let h = match args.wait_ready {
        Some(secs) => wait_ready(&paths, h, Duration::from_secs(secs)).await?,
        None => h,
    };
    print_json(&hire_json(&h));
    Ok(ExitCode::SUCCESS)
}

/// Reads the roster until the hire is ready; its record then, or the
/// refusal with the last reason its seat gave.
async fn wait_ready(
    paths: &StatePaths,
    hire: mailbox_pb::HireRecord,
    within: Duration,
) -> anyhow::Result<mailbox_pb::HireRecord> {
    let until = tokio::time::Instant::now() + within;
    let mut last = hire;
    loop {
        if let Some(h) = clients::mailbox(paths)?
            .roster(mailbox_pb::RosterRequest {})
            .await
            .map_err(refused)?
            .into_inner()
            .hires
            .into_iter()
            .find(|h| h.hire_id == last.hire_id)
        {
            last = h;
        }
        if last.readiness == clankie_types::hire::HireReadiness::Ready.wire() {
            return Ok(last);
        }
        if tokio::time::Instant::now() >= until {
            let why = match last.readiness_reason.as_str() {
                "" => "its seat never polled",
                r => r,
            };
            return Err(ErrorCode::HarnessNotReady
                .err(format!(
                    "hire {} was not ready within {} s ({why}); its pane stays open and its deliveries wait",
                    last.hire_id,
                    within.as_secs()
                ))
                .into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub async fn close(
    paths: StatePaths,
    hire_id: String,
    conversation: String,
) -> anyhow::Result<ExitCode> {
    let h = clients::mailbox(&paths)?
        .close_hire(mailbox_pb::CloseHireRequest {
            hire_id,
            conversation_id: conversation,
        })
        .await
        .map_err(refused)?
        .into_inner();
    // A Codex hire's app-server daemon outlives its pane (and the stack):
    // it goes with the hire.
    if let Some((home, bin)) = crate::support::codex::launched(&h.command) {
        crate::support::codex::stop_daemon(&home, &bin).await;
    }
    print_json(&hire_json(&h));
    Ok(ExitCode::SUCCESS)
}
