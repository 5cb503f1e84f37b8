//! `clankie work`: the fleet's work: open hires and tracker budgets, and
//! the owner's work-item gestures ([`super::work_item`]).

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::paths::StatePaths;
use clap::Subcommand;
use serde_json::json;

use crate::support::clients::{self, refused};
use crate::support::output::print_json;

use super::tracker::{budgets, budgets_json, print_budgets};

#[derive(Subcommand)]
pub enum WorkCommand {
    /// Open hires and the tracker request budgets.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// One work-item gesture on the repository's recorded tracker: assign
    /// work metadata, add or remove a role label, or append a blocker.
    /// Prints a requestId to keep.
    Write(super::work_item::WriteArgs),
    /// A work-item write's recorded result, by its requestId (never writes).
    Receipt {
        request_id: String,
        #[arg(long)]
        json: bool,
    },
}

/// `clankie work status`.
pub async fn work(paths: StatePaths, command: WorkCommand) -> anyhow::Result<ExitCode> {
    let json = match command {
        WorkCommand::Status { json } => json,
        WorkCommand::Write(args) => return super::work_item::write(paths, args).await,
        WorkCommand::Receipt { request_id, json } => {
            return super::work_item::receipt(paths, request_id, json).await;
        }
    };
    let mut mailbox = clients::mailbox(&paths)?;
    let roster = mailbox
        .roster(mailbox_pb::RosterRequest {})
        .await
        .map_err(refused)?
        .into_inner();
    let open: Vec<_> = roster
        .hires
        .iter()
        .filter(|h| clankie_types::hire::HireEnd::open(h.ended))
        .collect();
    let b = budgets(&paths).await?;
    if json {
        print_json(&json!({
            "openHires": open.iter().map(|h| json!({
                "hireId": h.hire_id, "role": clankie_types::Role::wire_word(h.role), "projectId": h.project_id, "paneId": h.pane_id,
            })).collect::<Vec<_>>(),
            "trackerBudgets": budgets_json(&b),
        }));
    } else {
        println!("open hires: {}", open.len());
        for h in &open {
            println!(
                "  {}  {:<8} {}  pane {}",
                h.hire_id,
                clankie_types::Role::wire_word(h.role),
                h.project_id,
                h.pane_id
            );
        }
        print_budgets(&b, false);
    }
    Ok(ExitCode::SUCCESS)
}
