//! Owner and lead commands of the mailbox: projects, lead conversations,
//! hires, the roster and transcripts.

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as pb;
use clankie_runtime::grpc::Client;
use clankie_runtime::paths::StatePaths;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::owner_cmds::{owner_meta, refused};

fn client(paths: &StatePaths) -> anyhow::Result<pb::mailbox_client::MailboxClient<Client>> {
    Ok(clankie_runtime::clients::mailbox(paths, owner_meta(paths)?))
}

#[derive(Subcommand)]
pub enum ProjectCommand {
    /// Register a project (or add a workspace to it).
    Add {
        name: String,
        /// The project's workspace: an existing absolute folder.
        #[arg(long)]
        workspace: String,
        #[arg(long, default_value = "")]
        machine: String,
        #[arg(long, default_value = "")]
        platform: String,
        /// The lead conversation that owns it (default: the global head).
        #[arg(long, default_value = "")]
        lead: String,
        /// Open worker hires allowed at once (default 4).
        #[arg(long, default_value_t = 0)]
        worker_cap: u32,
        /// The project keeps a standing reviewer seat.
        #[arg(long)]
        reviewer: bool,
    },
    /// List projects with their revisions and workspaces.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Change a project's settings at the revision you read.
    Set {
        project: String,
        #[arg(long)]
        revision: u64,
        /// The tracker binding: builtin, linear, or none.
        #[arg(long, value_parser = ["builtin", "linear", "none"])]
        tracker: Option<String>,
        /// The built-in team the project's issues live in.
        #[arg(long)]
        team: Option<String>,
        /// The bound Linear project (UUID).
        #[arg(long)]
        linear_project: Option<String>,
        /// A workspace's saved tracker convention: WORKSPACE=builtin|linear|none (repeatable).
        #[arg(long = "convention")]
        conventions: Vec<String>,
        /// Put the project on Auto, or take it off.
        #[arg(long, value_parser = ["on", "off"])]
        auto: Option<String>,
        /// One line for the lead (at most 280 characters).
        #[arg(long)]
        focus: Option<String>,
        /// An override for autonomous work: everyday|outward|machineSetup=on|off (repeatable).
        #[arg(long = "override")]
        overrides: Vec<String>,
    },
    /// Each project's status line: agents working, landed today, needs you.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Remove one workspace record at the revision you read (no folder is deleted).
    RemoveWorkspace {
        project: String,
        workspace_id: String,
        #[arg(long)]
        revision: u64,
    },
}

#[derive(Subcommand)]
pub enum LeadCommand {
    /// Start a lead conversation.
    Add {
        title: String,
        /// The lead chat's folder (workspace matching for Auto rounds).
        #[arg(long, default_value = "")]
        workspace: String,
        /// A tracker project it owns: a built-in team key or a Linear project UUID (repeatable).
        #[arg(long = "project")]
        projects: Vec<String>,
    },
    /// List the global head and lead conversations.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a lead conversation; its hires report to the head until adopted.
    Remove { conversation_id: String },
}

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

use crate::terminal::field;
pub use crate::terminal::print_json;

pub fn hire_json(h: &pb::HireRecord) -> serde_json::Value {
    json!({
        "hireId": h.hire_id,
        "conversationId": h.conversation_id,
        "lead": if h.owner_present { h.conversation_id.as_str() } else { "unowned" },
        "sandboxed": h.sandboxed,
        "projectId": h.project_id,
        "role": h.role,
        "linkId": h.link_id,
        "fleet": h.fleet,
        "paneId": h.pane_id,
        "workspace": h.workspace,
        "command": h.command,
        "ended": h.ended,
    })
}

pub async fn project(paths: StatePaths, command: ProjectCommand) -> anyhow::Result<ExitCode> {
    let mut c = client(&paths)?;
    match command {
        ProjectCommand::Add {
            name,
            workspace,
            machine,
            platform,
            lead,
            worker_cap,
            reviewer,
        } => {
            let workspace = std::path::absolute(&workspace)?.display().to_string();
            let p = c
                .add_project(pb::AddProjectRequest {
                    name,
                    workspace,
                    machine,
                    platform,
                    lead_conversation_id: lead,
                    worker_cap,
                    standing_reviewer: reviewer,
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&clankie_types::views::project(&p));
        }
        ProjectCommand::List { json } => {
            let all = c
                .list_projects(pb::ListProjectsRequest {})
                .await
                .map_err(refused)?
                .into_inner()
                .projects;
            if json {
                print_json(
                    &json!({ "projects": all.iter().map(clankie_types::views::project).collect::<Vec<_>>() }),
                );
            } else {
                for p in &all {
                    println!(
                        "{}  {}  rev {}  cap {}  lead {}",
                        field(&p.project_id),
                        field(&p.name),
                        p.revision,
                        p.worker_cap,
                        if p.lead_conversation_id.is_empty() {
                            "global".into()
                        } else {
                            field(&p.lead_conversation_id)
                        }
                    );
                    for w in &p.workspaces {
                        println!("    {}  {}", field(&w.workspace_id), field(&w.path));
                    }
                }
            }
        }
        ProjectCommand::Set {
            project,
            revision,
            tracker,
            team,
            linear_project,
            conventions,
            auto,
            focus,
            overrides,
        } => {
            return crate::tracker_cmds::project_set(
                &paths,
                crate::tracker_cmds::ProjectSet {
                    project,
                    revision,
                    tracker,
                    team,
                    linear_project,
                    conventions,
                    auto: auto.map(|a| a == "on"),
                    focus,
                    overrides,
                },
            )
            .await;
        }
        ProjectCommand::Status { json } => {
            return crate::auto_cmds::project_status(&paths, json).await;
        }
        ProjectCommand::RemoveWorkspace {
            project,
            workspace_id,
            revision,
        } => {
            let p = c
                .remove_workspace(pb::RemoveWorkspaceRequest {
                    project_id: project,
                    workspace_id,
                    expected_revision: revision,
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&clankie_types::views::project(&p));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn lead(paths: StatePaths, command: LeadCommand) -> anyhow::Result<ExitCode> {
    let mut c = client(&paths)?;
    let conv_json = |c: &pb::Conversation| {
        json!({
            "conversationId": c.conversation_id,
            "kind": c.kind,
            "title": c.title,
            "removed": c.removed,
        })
    };
    match command {
        LeadCommand::Add {
            title,
            workspace,
            projects,
        } => {
            let workspace = if workspace.is_empty() {
                workspace
            } else {
                std::path::absolute(&workspace)?.display().to_string()
            };
            let conv = c
                .add_conversation(pb::AddConversationRequest {
                    title,
                    workspace,
                    projects,
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&conv_json(&conv));
        }
        LeadCommand::List { json } => {
            let all = c
                .list_conversations(pb::ListConversationsRequest {})
                .await
                .map_err(refused)?
                .into_inner()
                .conversations;
            if json {
                print_json(
                    &json!({ "conversations": all.iter().map(conv_json).collect::<Vec<_>>() }),
                );
            } else {
                for conv in all.iter().filter(|c| !c.removed) {
                    println!(
                        "{}  {}  {}",
                        field(&conv.conversation_id),
                        field(&conv.kind),
                        field(&conv.title)
                    );
                }
            }
        }
        LeadCommand::Remove { conversation_id } => {
            let conv = c
                .remove_conversation(pb::RemoveConversationRequest { conversation_id })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&conv_json(&conv));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn hire(paths: StatePaths, args: HireArgs) -> anyhow::Result<ExitCode> {
    let h = client(&paths)?
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
    let h = client(&paths)?
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

pub async fn message(
    paths: StatePaths,
    hire_id: String,
    text: String,
    conversation: String,
) -> anyhow::Result<ExitCode> {
    let r = client(&paths)?
        .message_seat(pb::MessageSeatRequest {
            hire_id,
            text,
            conversation_id: conversation,
        })
        .await
        .map_err(refused)?
        .into_inner();
    print_json(&json!({
        "deliveryId": r.delivery_id,
        "ownerConversationId": r.owner_conversation_id,
        "adopted": r.adopted,
    }));
    Ok(ExitCode::SUCCESS)
}

pub async fn roster(paths: StatePaths, json_out: bool) -> anyhow::Result<ExitCode> {
    let hires = client(&paths)?
        .roster(pb::RosterRequest {})
        .await
        .map_err(refused)?
        .into_inner()
        .hires;
    if json_out {
        print_json(&json!({ "hires": hires.iter().map(hire_json).collect::<Vec<_>>() }));
    } else {
        for h in &hires {
            println!(
                "{}  {}  {}  pane {}  lead {}{}{}",
                field(&h.hire_id),
                field(&h.role),
                field(&h.project_id),
                field(&h.pane_id),
                if h.owner_present {
                    field(&h.conversation_id)
                } else {
                    "unowned".into()
                },
                if h.ended.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", field(&h.ended))
                },
                if h.sandboxed { "  sandboxed" } else { "" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The roster as Herdr users read it: owner, hired, and `mine` for the
/// conversation in CLANKIE_CONVERSATION_ID.
pub async fn agent_list(paths: StatePaths, json_out: bool) -> anyhow::Result<ExitCode> {
    let mine = std::env::var("CLANKIE_CONVERSATION_ID").unwrap_or_default();
    let hires = client(&paths)?
        .roster(pb::RosterRequest {})
        .await
        .map_err(refused)?
        .into_inner()
        .hires;
    let rows: Vec<serde_json::Value> = hires
        .iter()
        .filter(|h| h.ended.is_empty())
        .map(|h| {
            let mut v = hire_json(h);
            v["owner"] = v["lead"].clone();
            v["hired"] = json!(true);
            if !mine.is_empty() {
                v["mine"] = json!(h.owner_present && h.conversation_id == mine);
            }
            v
        })
        .collect();
    if json_out {
        print_json(&json!({ "agents": rows }));
    } else {
        for r in &rows {
            println!(
                "{}  pane {}  {}  owner {}{}",
                field(r["hireId"].as_str().unwrap_or("")),
                field(r["paneId"].as_str().unwrap_or("")),
                field(r["role"].as_str().unwrap_or("")),
                field(r["owner"].as_str().unwrap_or("")),
                if r["mine"] == true { "  (mine)" } else { "" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn transcript(
    paths: StatePaths,
    conversation: String,
    after: u64,
    wait_ms: u32,
) -> anyhow::Result<ExitCode> {
    let resp = client(&paths)?
        .read_transcript(pb::ReadTranscriptRequest {
            conversation_id: conversation,
            after,
            wait_ms,
        })
        .await
        .map_err(refused)?
        .into_inner();
    print_json(&json!({
        "lastSeq": resp.last_seq,
        "entries": resp.entries.iter().map(|e| json!({
            "seq": e.seq,
            "kind": e.kind,
            "role": e.role,
            "text": e.text,
            "source": e.source,
            "untrusted": e.untrusted,
            "receiptId": e.receipt_id,
        })).collect::<Vec<_>>(),
    }));
    Ok(ExitCode::SUCCESS)
}
