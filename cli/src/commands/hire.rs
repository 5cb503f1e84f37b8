//! `clankie hire` and `clankie close`: a hire into a new pane of a linked
//! session, and its close by the owning conversation.

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as pb;
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
    /// What runs in the pane: `command` (the command after `--`) or `pi`
    /// (Pi with the worker extension; what follows `--` are Pi's own
    /// arguments).
    #[arg(long, default_value = "command", value_parser = ["command", "pi"])]
    pub harness: String,
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
    /// profile (`PI_CODING_AGENT_DIR`, else `~/.pi/agent`).
    #[arg(long = "profile", value_name = "DIR")]
    pub profiles: Vec<std::path::PathBuf>,
    /// The worker's command (or Pi's arguments), after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// The pane command a hire runs. A Pi hire is refused unless the release
/// is accepted and its probe passes.
async fn pane_command(args: &HireArgs) -> anyhow::Result<Vec<String>> {
    use crate::support::pi;
    if args.harness != "pi" {
        if args.command.is_empty() {
            anyhow::bail!("give the worker's command after `--`, or --harness pi");
        }
        return Ok(args.command.clone());
    }
    let package = pi::PiPackage::find(args.pi.as_deref())?;
    if let Err(why) = package.accepted() {
        anyhow::bail!("pi_release_unsupported: {why}");
    }
    let node = pi::node(args.node.as_deref())?;
    let verdict = super::pi::probe(Some(&package.dir), Some(&node)).await;
    if verdict["ok"] != true {
        anyhow::bail!("pi_probe_failed: the hire was refused: {verdict}");
    }
    let worker = pi::worker_dir()?;
    pi::pane_command(&pi::Launch {
        node: &node,
        package: &package,
        worker: &worker,
        model: args.model.as_deref(),
        pi_args: &args.command,
    })
}

/// The profile folders, absolute: the ones named, and Pi's own for a Pi
/// hire.
fn profiles(args: &HireArgs) -> anyhow::Result<Vec<String>> {
    let mut dirs = args.profiles.clone();
    if args.harness == "pi" {
        dirs.extend(crate::support::pi::profile_dir());
    }
    dirs.iter()
        .map(|d| {
            std::fs::canonicalize(d)
                .map(|d| d.display().to_string())
                .map_err(|e| anyhow::anyhow!("the profile folder {}: {e}", d.display()))
        })
        .collect()
}

pub async fn hire(paths: StatePaths, args: HireArgs) -> anyhow::Result<ExitCode> {
    let command = pane_command(&args).await?;
    let profile = profiles(&args)?;
    let h = clients::mailbox(&paths)?
        .hire(pb::HireRequest {
            // Pi's extension holds the seat's control connection in Pi's
            // own process: nothing Pi starts may use it.
            harness_only_control: args.harness == "pi",
            profile,
            project: args.project,
            role: args.role,
            command,
            conversation_id: args.conversation,
            link_id: args.link,
            workspace_id: String::new(),
            autonomous: args.autonomous,
        })
        .await
        .map_err(refused)?
        .into_inner();
    print_json(&hire_json(&h));
    Ok(ExitCode::SUCCESS)
}

pub async fn close(
    paths: StatePaths,
    hire_id: String,
    conversation: String,
) -> anyhow::Result<ExitCode> {
    let h = clients::mailbox(&paths)?
        .close_hire(pb::CloseHireRequest {
            hire_id,
            conversation_id: conversation,
        })
        .await
        .map_err(refused)?
        .into_inner();
    print_json(&hire_json(&h));
    Ok(ExitCode::SUCCESS)
}
