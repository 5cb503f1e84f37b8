//! `clankie project`: projects, their workspaces and caps, the owning lead,
//! the revision-fenced settings update, and the Auto status per project.

use std::process::ExitCode;

use anyhow::bail;
use clankie_proto::auto::v1 as auto_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::TrackerBinding;
use clap::Subcommand;
use serde_json::json;

use crate::support::clients::{self, refused};
use crate::support::output::{field, print_json};

#[derive(Subcommand)]
pub enum ProjectCommand {
    /// Register a project (or add a workspace to it).
    Add {
        name: String,
        /// The project's workspace: an existing absolute folder here, or with
        /// --machine the absolute path on that machine, as spelled there.
        #[arg(long)]
        workspace: String,
        /// The registered fleet machine the workspace is on (default: this one).
        #[arg(long, default_value = "")]
        machine: String,
        /// The workspace's platform on that machine: linux, macos or windows.
        #[arg(long, default_value = "", requires = "machine")]
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
    /// Remove one workspace record (no folder is deleted).
    RemoveWorkspace {
        project: String,
        /// The workspace as registered: its path (or its id).
        #[arg(long)]
        workspace: String,
        /// The machine it was registered for (default: this one).
        #[arg(long, default_value = "")]
        machine: String,
        #[arg(long, default_value = "", requires = "machine")]
        platform: String,
        /// The revision you read (default: the project's revision now).
        #[arg(long)]
        revision: Option<u64>,
    },
}

pub async fn project(paths: StatePaths, command: ProjectCommand) -> anyhow::Result<ExitCode> {
    let mut c = clients::mailbox(&paths)?;
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
            // Another machine's path is sent as spelled: the mailbox
            // normalizes it for its platform and never resolves it here.
            let workspace = if machine.is_empty() {
                std::path::absolute(&workspace)?.display().to_string()
            } else {
                workspace
            };
            let p = c
                .add_project(mailbox_pb::AddProjectRequest {
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
            let all = clients::projects(&mut c).await?;
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
                            clankie_types::leads::HEAD.into()
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
            return project_set(
                &paths,
                ProjectSet {
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
            return project_status(&paths, json).await;
        }
        ProjectCommand::RemoveWorkspace {
            project,
            workspace,
            machine,
            platform,
            revision,
        } => {
            let all = clients::projects(&mut c).await?;
            let p = all
                .iter()
                .find(|p| p.name == project || p.project_id == project)
                .ok_or_else(|| anyhow::anyhow!("no project {project}"))?;
            // The exact registration: this machine's path made absolute
            // (never resolved: its folder may be gone), or another
            // machine's spelling normalized as it was when added.
            let spelling = if machine.is_empty() {
                std::path::absolute(&workspace)?.display().to_string()
            } else {
                clankie_types::workspace::normalized(&workspace, &platform)
                    .map_err(|why| anyhow::anyhow!(why))?
            };
            let ws = p
                .workspaces
                .iter()
                .find(|w| {
                    w.workspace_id == workspace || (w.path == spelling && w.machine == machine)
                })
                .ok_or_else(|| anyhow::anyhow!("project {} has no workspace {spelling}", p.name))?;
            let p = c
                .remove_workspace(mailbox_pb::RemoveWorkspaceRequest {
                    project_id: p.project_id.clone(),
                    workspace_id: ws.workspace_id.clone(),
                    expected_revision: revision.unwrap_or(p.revision),
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&clankie_types::views::project(&p));
        }
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

/// A tracker binding as the flags spell it: `none` (or empty) unbinds.
fn binding(flag: &str, word: &str) -> anyhow::Result<i32> {
    let word = if word == "none" { "" } else { word };
    TrackerBinding::parse(word)
        .map(TrackerBinding::wire)
        .ok_or_else(|| anyhow::anyhow!("{flag} {word}: choose builtin, linear or none"))
}

/// `clankie project set`: the revision-fenced project update.
pub async fn project_set(paths: &StatePaths, set: ProjectSet) -> anyhow::Result<ExitCode> {
    let tracker = set.tracker.map(|t| binding("--tracker", &t)).transpose()?;
    let workspace_conventions = pairs(
        &set.conventions,
        "--convention",
        "WORKSPACE=builtin|linear|none",
    )?
    .into_iter()
    .map(|(ws, c)| Ok((ws, binding("--convention", &c)?)))
    .collect::<anyhow::Result<_>>()?;
    let mut overrides = std::collections::HashMap::new();
    for (k, v) in pairs(&set.overrides, "--override", "KEY=on|off")? {
        let on = match v.as_str() {
            "on" => true,
            "off" => false,
            _ => bail!("--override {k}={v}: use on or off"),
        };
        overrides.insert(k, on);
    }
    // A Linear project is named only once Linear knows it (no fallback);
    // refused, the settings stay as they were.
    if let Some(id) = set.linear_project.as_deref().filter(|id| !id.is_empty()) {
        clients::mcp_host(paths)?
            .validate_linear_project(mcphost_pb::ValidateLinearProjectRequest {
                project_id: id.to_string(),
            })
            .await
            .map_err(refused)?;
    }
    let mut mailbox = clients::mailbox(paths)?;
    let p = mailbox
        .update_project(mailbox_pb::UpdateProjectRequest {
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

/// `clankie project status`: agents working, landed today, needs you.
pub async fn project_status(paths: &StatePaths, json: bool) -> anyhow::Result<ExitCode> {
    let r = clients::auto(paths)?
        .project_status(auto_pb::ProjectStatusRequest {})
        .await
        .map_err(refused)?
        .into_inner();
    if json {
        print_json(&json!({
            "needsYouTotal": r.needs_you_total,
            "projects": r
                .projects
                .iter()
                .map(clankie_types::views::project_status_line)
                .collect::<Vec<_>>(),
        }));
    } else {
        for p in &r.projects {
            println!(
                "{:<20} {:<4} {} working · {} landed today · {} need you{}",
                p.name,
                if p.auto { "Auto" } else { "" },
                p.agents_working,
                p.landed_today,
                p.needs_you,
                if p.focus.is_empty() {
                    String::new()
                } else {
                    format!(" · {}", p.focus)
                }
            );
        }
        println!("owner questions pending in all: {}", r.needs_you_total);
    }
    Ok(ExitCode::SUCCESS)
}
