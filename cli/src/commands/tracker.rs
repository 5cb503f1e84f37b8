//! `clankie tracker`: the built-in tracker on the owner's route: calls,
//! teams, imports, role profiles and budgets.

use clankie_types::fleet::Outcome;
use clankie_types::host::BudgetClass;
use std::process::ExitCode;

use anyhow::Context;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::paths::StatePaths;
use clap::Subcommand;
use serde_json::{Value, json};

use crate::support::clients::{self, refused};
use crate::support::output::print_json;

#[derive(Subcommand)]
pub enum TrackerCommand {
    /// Call one tracker tool on the owner's route: `call save_issue '{"team":"ENG","title":"t"}'`.
    Call {
        /// The tool, with or without the `linear_` prefix.
        tool: String,
        /// The arguments as a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Count the call in the background class.
        #[arg(long)]
        background: bool,
    },
    /// Create a team (its key is the `KEY` of `KEY-n`).
    Team {
        key: String,
        #[arg(long)]
        name: String,
        /// The team was cut over from Linear: new issues are LOCAL-KEY-n.
        #[arg(long)]
        cut_over: bool,
    },
    /// Import one issue into a cut-over team under its Linear key.
    Import {
        team: String,
        identifier: String,
        #[arg(long)]
        uuid: String,
        #[arg(long)]
        title: String,
        #[arg(long, default_value = "")]
        description: String,
        /// The workflow state it had in Linear.
        #[arg(long = "issue-state", default_value = "Backlog")]
        issue_state: String,
    },
    /// The vocabulary's size as each role sees it.
    Profiles {
        #[arg(long)]
        json: bool,
    },
    /// The per-actor request budgets.
    Budgets {
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(paths: StatePaths, command: TrackerCommand) -> anyhow::Result<ExitCode> {
    match command {
        TrackerCommand::Call {
            tool,
            arguments,
            background,
        } => {
            let _: serde_json::Map<String, Value> =
                serde_json::from_str(&arguments).context("the arguments must be a JSON object")?;
            let name = if tool.starts_with("linear_") {
                tool
            } else {
                format!("linear_{tool}")
            };
            let r = clients::mcp_host(&paths)?
                .call_tool(mcphost_pb::CallToolRequest {
                    name,
                    arguments_json: arguments,
                    receipt_id: String::new(),
                    background,
                    ..Default::default()
                })
                .await
                .map_err(refused)?
                .into_inner();
            let result: Value = serde_json::from_str(&r.result_json).unwrap_or(Value::Null);
            let structured = result.get("structuredContent").cloned().unwrap_or(result);
            print_json(&json!({
                "receiptId": r.receipt_id,
                "outcome": Outcome::from_wire(r.outcome),
                "result": structured,
            }));
            Ok(if Outcome::from_wire(r.outcome) == Some(Outcome::Ok) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        TrackerCommand::Team {
            key,
            name,
            cut_over,
        } => {
            let t = clients::tracker(&paths)?
                .create_team(tracker_pb::CreateTeamRequest {
                    key,
                    name,
                    cut_over,
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&json!({ "id": t.id, "key": t.key, "name": t.name }));
            Ok(ExitCode::SUCCESS)
        }
        TrackerCommand::Import {
            team,
            identifier,
            uuid,
            title,
            description,
            issue_state,
        } => {
            let r = clients::tracker(&paths)?
                .import_issue(tracker_pb::ImportIssueRequest {
                    team,
                    identifier,
                    linear_uuid: uuid,
                    title,
                    description,
                    state: issue_state,
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&serde_json::from_str(&r.result_json).unwrap_or(Value::Null));
            Ok(ExitCode::SUCCESS)
        }
        TrackerCommand::Profiles { json } => {
            let r = clients::mcp_host(&paths)?
                .tracker_profiles(mcphost_pb::TrackerProfilesRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            if !json {
                for p in &r.roles {
                    println!(
                        "{:<10} tools={:<3} schema={} B ~{} tokens{}",
                        clankie_types::Role::wire_word(p.role),
                        p.tools,
                        p.schema_bytes,
                        p.estimated_tokens,
                        if p.hidden.is_empty() {
                            String::new()
                        } else {
                            format!(" hidden={}", p.hidden.join(","))
                        }
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            print_json(&json!({
                "roles": r.roles.iter().map(|p| json!({
                    "role": clankie_types::Role::wire_word(p.role),
                    "tools": p.tools,
                    "schemaBytes": p.schema_bytes,
                    "estimatedTokens": p.estimated_tokens,
                    "hidden": p.hidden,
                })).collect::<Vec<_>>()
            }));
            Ok(ExitCode::SUCCESS)
        }
        TrackerCommand::Budgets { json } => {
            let b = budgets(&paths).await?;
            print_budgets(&b, json);
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub async fn budgets(paths: &StatePaths) -> anyhow::Result<mcphost_pb::TrackerBudgetsResponse> {
    Ok(clients::mcp_host(paths)?
        .tracker_budgets(mcphost_pb::TrackerBudgetsRequest {})
        .await
        .map_err(refused)?
        .into_inner())
}

pub fn budgets_json(b: &mcphost_pb::TrackerBudgetsResponse) -> Value {
    let w = |w: &Option<mcphost_pb::BudgetWindow>| {
        let w = w.unwrap_or_default();
        json!({ "limit": w.limit, "used": w.used, "retryAtMs": (w.retry_at_ms > 0).then_some(w.retry_at_ms) })
    };
    json!({
        "requestsPerHour": b.requests_per_hour,
        "writesPerMinute": b.writes_per_minute,
        "actors": b.actors.iter().map(|a| json!({
            "actor": a.actor,
            "role": clankie_types::Role::wire_word(a.role),
            "class": BudgetClass::wire_word(a.class),
            "requests": w(&a.requests),
            "writes": w(&a.writes),
            "refused": a.refused,
        })).collect::<Vec<_>>(),
    })
}

pub fn print_budgets(b: &mcphost_pb::TrackerBudgetsResponse, json: bool) {
    if json {
        print_json(&budgets_json(b));
        return;
    }
    println!(
        "tracker budgets: {} requests/hour and {} writes/minute per worker or reviewer, per class",
        b.requests_per_hour, b.writes_per_minute
    );
    if b.actors.is_empty() {
        println!("  (no counted calls yet)");
    }
    for a in &b.actors {
        let r = a.requests.unwrap_or_default();
        let w = a.writes.unwrap_or_default();
        println!(
            "  {:<40} {:<8} {:<11} requests {:>3}/{}  writes {:>2}/{}  refused {}",
            a.actor,
            clankie_types::Role::wire_word(a.role),
            BudgetClass::wire_word(a.class),
            r.used,
            r.limit,
            w.used,
            w.limit,
            a.refused
        );
    }
}
