//! `clankie work write` and `clankie work receipt`: the owner's narrow
//! work-item gestures (`work_item_write`) on the tracker recorded for a
//! repository's project. Keep the printed `requestId`: after an uncertain
//! result, read the receipt and the tracker; never resend the change with a
//! new id.

use crate::support::exit::Exit;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::Role;
use clankie_types::fleet::Outcome;
use clap::Args;
use serde_json::{Value, json};

use crate::support::clients::{self, refused};
use crate::support::output::{field, json_text, print_json};

/// One gesture on one item.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("gesture").required(true).multiple(false)
    .args(["assign", "add_role_label", "remove_role_label", "blocker"])))]
pub struct WriteArgs {
    /// The source item (TEAM-n, LOCAL-TEAM-n or its id).
    pub item: String,
    /// Assign work metadata: the assignee (with `--priority` optionally).
    #[arg(long)]
    pub assign: Option<String>,
    /// The priority to assign (0 none, 1 urgent .. 4 low), with `--assign`.
    #[arg(long, requires = "assign")]
    pub priority: Option<i64>,
    /// Add the label naming this role (`role:ROLE`).
    #[arg(long)]
    pub add_role_label: Option<String>,
    /// Remove the label naming this role.
    #[arg(long)]
    pub remove_role_label: Option<String>,
    /// Append a blocker (a `blocked` work event with this text).
    #[arg(long)]
    pub blocker: Option<String>,
    /// The repository whose project's tracker is written (default: here).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Reuse a request id to read its original: a repeat never writes again.
    #[arg(long)]
    pub request_id: Option<String>,
}

fn role(word: &str) -> anyhow::Result<i32> {
    Role::parse(word)
        .map(Role::wire)
        .with_context(|| format!("{word} is not a role ({})", Role::WORDS.join(", ")))
}

fn printed(r: mcphost_pb::WorkItemWriteResponse, json: bool) -> ExitCode {
    let result = r.result.unwrap_or_default();
    let body: Value = serde_json::from_str(&result.result_json).unwrap_or(Value::Null);
    let outcome = Outcome::from_wire(result.outcome);
    let shown = body.get("structuredContent").cloned().unwrap_or(body);
    if json {
        print_json(&json!({
            "requestId": r.request_id,
            "outcome": outcome,
            "fromReceipt": result.from_receipt,
            "result": shown,
            "detail": (!result.detail.is_empty()).then_some(&result.detail),
        }));
    } else {
        println!(
            "request {}: {}{}",
            r.request_id,
            outcome.map_or("unknown", |o| o.as_str()),
            if result.from_receipt {
                " (from its receipt)"
            } else {
                ""
            }
        );
        if !result.detail.is_empty() {
            println!("  {}", field(&result.detail));
        }
        if !shown.is_null() {
            println!("{}", json_text(&shown));
        }
    }
    match outcome {
        Some(Outcome::Ok) => ExitCode::SUCCESS,
        Some(Outcome::Uncertain) => {
            eprintln!(
                "uncertain: read `clankie work receipt {}` and the tracker; never resend the change with a new id",
                r.request_id
            );
            Exit::Unsettled.code()
        }
        _ => ExitCode::FAILURE,
    }
}

/// `clankie work write ITEM --assign|--add-role-label|--remove-role-label|--blocker`.
pub async fn write(paths: StatePaths, a: WriteArgs) -> anyhow::Result<ExitCode> {
    use mcphost_pb::work_item_write_request::Gesture;
    let gesture = if let Some(assignee) = a.assign {
        Gesture::Assign(mcphost_pb::WorkMetadata {
            assignee: Some(assignee),
            priority: a.priority,
        })
    } else if let Some(r) = a.add_role_label {
        Gesture::AddRoleLabel(role(&r)?)
    } else if let Some(r) = a.remove_role_label {
        Gesture::RemoveRoleLabel(role(&r)?)
    } else {
        Gesture::Blocker(a.blocker.unwrap_or_default())
    };
    let workspace = match a.workspace {
        Some(w) => w,
        None => std::env::current_dir().context("the current folder")?,
    };
    let workspace = std::fs::canonicalize(&workspace)
        .with_context(|| format!("{} is not a folder here", workspace.display()))?;
    let r = clients::mcp_host(&paths)?
        .work_item_write(mcphost_pb::WorkItemWriteRequest {
            request_id: a.request_id.unwrap_or_default(),
            workspace: workspace.display().to_string(),
            item: a.item,
            gesture: Some(gesture),
        })
        .await
        .map_err(refused)?
        .into_inner();
    Ok(printed(r, true))
}

/// `clankie work receipt REQUEST_ID`: reads, never writes.
pub async fn receipt(
    paths: StatePaths,
    request_id: String,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let r = clients::mcp_host(&paths)?
        .work_item_receipt(mcphost_pb::WorkItemReceiptRequest { request_id })
        .await
        .map_err(refused)?
        .into_inner();
    Ok(printed(r, json))
}
