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
    /// The worker's command, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub async fn hire(paths: StatePaths, args: HireArgs) -> anyhow::Result<ExitCode> {
    let h = clients::mailbox(&paths)?
        .hire(pb::HireRequest {
            project: args.project,
            role: args.role,
            command: args.command,
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
