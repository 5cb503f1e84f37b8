//! The owner's tracker commands: the owner's route into the tracker
//! vocabulary (`clankie tracker call`), teams and imports, the role profiles,
//! project tracker bindings (`clankie project set`), and the request budgets
//! that `clankie doctor` and `clankie work status` show.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clankie_proto::mailbox::v1 as pb;
use clankie_proto::mcphost::v1 as mpb;
use clankie_proto::tracker::v1 as tpb;
use clankie_runtime::Service;
use clankie_runtime::grpc::Client;
use clankie_runtime::paths::StatePaths;
use clap::Subcommand;
use serde_json::{Value, json};

use crate::owner_cmds::{owner_meta, refused};
use crate::terminal::print_json;

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
    Profiles,
    /// The per-actor request budgets.
    Budgets {
        #[arg(long)]
        json: bool,
    },
}

fn mcp(paths: &StatePaths) -> anyhow::Result<mpb::mcp_host_client::McpHostClient<Client>> {
    Ok(clankie_runtime::clients::mcp_host(
        paths,
        owner_meta(paths)?,
    ))
}

fn tracker(paths: &StatePaths) -> anyhow::Result<tpb::tracker_client::TrackerClient<Client>> {
    Ok(clankie_runtime::clients::tracker(paths, owner_meta(paths)?))
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
            let r = mcp(&paths)?
                .call_tool(mpb::CallToolRequest {
                    name,
                    arguments_json: arguments,
                    receipt_id: String::new(),
                    background,
                })
                .await
                .map_err(refused)?
                .into_inner();
            let result: Value = serde_json::from_str(&r.result_json).unwrap_or(Value::Null);
            let structured = result.get("structuredContent").cloned().unwrap_or(result);
            print_json(&json!({
                "receiptId": r.receipt_id,
                "outcome": r.outcome,
                "result": structured,
            }));
            Ok(if r.outcome == "ok" {
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
            let t = tracker(&paths)?
                .create_team(tpb::CreateTeamRequest {
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
            let r = tracker(&paths)?
                .import_issue(tpb::ImportIssueRequest {
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
        TrackerCommand::Profiles => {
            let r = mcp(&paths)?
                .tracker_profiles(mpb::TrackerProfilesRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&json!({
                "roles": r.roles.iter().map(|p| json!({
                    "role": p.role,
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

async fn budgets(paths: &StatePaths) -> anyhow::Result<mpb::TrackerBudgetsResponse> {
    Ok(mcp(paths)?
        .tracker_budgets(mpb::TrackerBudgetsRequest {})
        .await
        .map_err(refused)?
        .into_inner())
}

fn budgets_json(b: &mpb::TrackerBudgetsResponse) -> Value {
    let w = |w: &Option<mpb::BudgetWindow>| {
        let w = w.unwrap_or_default();
        json!({ "limit": w.limit, "used": w.used, "retryAtMs": (w.retry_at_ms > 0).then_some(w.retry_at_ms) })
    };
    json!({
        "requestsPerHour": b.requests_per_hour,
        "writesPerMinute": b.writes_per_minute,
        "actors": b.actors.iter().map(|a| json!({
            "actor": a.actor,
            "role": a.role,
            "class": a.class,
            "requests": w(&a.requests),
            "writes": w(&a.writes),
            "refused": a.refused,
        })).collect::<Vec<_>>(),
    })
}

fn print_budgets(b: &mpb::TrackerBudgetsResponse, json: bool) {
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
            a.actor, a.role, a.class, r.used, r.limit, w.used, w.limit, a.refused
        );
    }
}

/// `clankie doctor`: every service's health, the receipt store, and the
/// tracker budgets. Exits non-zero when anything is unhealthy.
pub async fn doctor(paths: StatePaths, json: bool) -> anyhow::Result<ExitCode> {
    let mut services = serde_json::Map::new();
    let mut healthy = true;
    for service in Service::START_ORDER {
        let meta = crate::owner_cmds::owner_meta(&paths).unwrap_or_default();
        let state = crate::up::service_state(&paths, service, meta).await;
        healthy &= state == "serving";
        services.insert(service.name().into(), json!(state));
    }
    let receipts = match mcp(&paths)?
        .receipt_stats(mpb::ReceiptStatsRequest {})
        .await
    {
        Ok(r) => {
            let r = r.into_inner();
            healthy &= r.healthy;
            json!({ "healthy": r.healthy, "problem": r.problem, "records": r.records, "uncertain": r.uncertain })
        }
        Err(s) => {
            healthy = false;
            json!({ "healthy": false, "problem": s.message() })
        }
    };
    let budgets = budgets(&paths).await.ok();
    let sandbox = worker_sandbox(&paths).await;
    if json {
        print_json(&json!({
            "healthy": healthy,
            "services": services,
            "receipts": receipts,
            "trackerBudgets": budgets.as_ref().map(budgets_json),
            "workerSandbox": sandbox,
        }));
    } else {
        for (name, state) in &services {
            println!("{name:<10} {}", state.as_str().unwrap_or(""));
        }
        println!("receipts   {receipts}");
        println!(
            "worker sandbox: {} ({})",
            sandbox["setting"].as_str().unwrap_or("unknown"),
            match sandbox["available"].as_bool() {
                Some(true) => "bubblewrap works here".to_string(),
                _ => format!(
                    "unavailable: {}",
                    sandbox["problem"].as_str().unwrap_or("unknown")
                ),
            }
        );
        match &budgets {
            Some(b) => print_budgets(b, false),
            None => println!("tracker budgets: unavailable (is the mcp-host running?)"),
        }
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The worker sandbox: the owner's setting, and whether bubblewrap can
/// confine a hire on this machine right now.
async fn worker_sandbox(paths: &StatePaths) -> serde_json::Value {
    let setting = match crate::owner_cmds::admission_client(paths) {
        Ok(mut c) => match c
            .fleet_status(clankie_proto::admission::v1::FleetStatusRequest {})
            .await
        {
            Ok(s) => match s.into_inner().settings {
                Some(s) if s.worker_sandbox => "on",
                Some(_) => "off",
                None => "unknown",
            },
            Err(_) => "unknown",
        },
        Err(_) => "unknown",
    };
    match clankie_runtime::sandbox::Sandbox::probe().await {
        Ok(_) => json!({ "setting": setting, "available": true }),
        Err(e) => json!({ "setting": setting, "available": false, "problem": e.message }),
    }
}

#[derive(Subcommand)]
pub enum WorkCommand {
    /// Open hires and the tracker request budgets.
    Status {
        #[arg(long)]
        json: bool,
    },
}

/// `clankie work status`.
pub async fn work(paths: StatePaths, command: WorkCommand) -> anyhow::Result<ExitCode> {
    let WorkCommand::Status { json } = command;
    let mut mailbox = clankie_runtime::clients::mailbox(&paths, owner_meta(&paths)?);
    let roster = mailbox
        .roster(pb::RosterRequest {})
        .await
        .map_err(refused)?
        .into_inner();
    let open: Vec<_> = roster.hires.iter().filter(|h| h.ended.is_empty()).collect();
    let b = budgets(&paths).await?;
    if json {
        print_json(&json!({
            "openHires": open.iter().map(|h| json!({
                "hireId": h.hire_id, "role": h.role, "projectId": h.project_id, "paneId": h.pane_id,
            })).collect::<Vec<_>>(),
            "trackerBudgets": budgets_json(&b),
        }));
    } else {
        println!("open hires: {}", open.len());
        for h in &open {
            println!(
                "  {}  {:<8} {}  pane {}",
                h.hire_id, h.role, h.project_id, h.pane_id
            );
        }
        print_budgets(&b, false);
    }
    Ok(ExitCode::SUCCESS)
}

/// `clankie project set` arguments.
pub struct ProjectSet {
    pub project: String,
    pub revision: u64,
    pub tracker: Option<String>,
    pub team: Option<String>,
    pub linear_project: Option<String>,
    pub conventions: Vec<String>,
    pub auto: Option<bool>,
    pub focus: Option<String>,
    pub overrides: Vec<String>,
}

fn pairs(list: &[String], flag: &str, form: &str) -> anyhow::Result<Vec<(String, String)>> {
    list.iter()
        .map(|c| {
            c.rsplit_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| anyhow::anyhow!("{flag} takes {form}"))
        })
        .collect()
}

/// `clankie project set`: the revision-fenced project update.
pub async fn project_set(paths: &StatePaths, set: ProjectSet) -> anyhow::Result<ExitCode> {
    let tracker = set
        .tracker
        .map(|t| if t == "none" { String::new() } else { t });
    let workspace_conventions = pairs(
        &set.conventions,
        "--convention",
        "WORKSPACE=builtin|linear|none",
    )?
    .into_iter()
    .map(|(ws, c)| (ws, if c == "none" { String::new() } else { c }))
    .collect();
    let mut overrides = std::collections::HashMap::new();
    for (k, v) in pairs(&set.overrides, "--override", "KEY=on|off")? {
        let on = match v.as_str() {
            "on" => true,
            "off" => false,
            _ => bail!("--override {k}={v}: use on or off"),
        };
        overrides.insert(k, on);
    }
    let mut mailbox = clankie_runtime::clients::mailbox(paths, owner_meta(paths)?);
    let p = mailbox
        .update_project(pb::UpdateProjectRequest {
            project: set.project,
            expected_revision: set.revision,
            tracker,
            tracker_team: set.team,
            linear_project_id: set.linear_project,
            workspace_conventions,
            auto: set.auto,
            focus: set.focus,
            overrides,
        })
        .await
        .map_err(refused)?
        .into_inner();
    print_json(&clankie_types::views::project_settings(&p));
    Ok(ExitCode::SUCCESS)
}
