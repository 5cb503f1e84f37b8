//! Hires: opening a pane for a project in a linked session, closing it,
//! the roster, and retiring a hire whose pane is gone.

use clankie_runtime::clients::Answer as _;
use clankie_runtime::clients::{Call, INTERNAL};
use clankie_types::Role;
use std::path::Path;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::auto::v1 as auto_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::sandbox;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::leads;
use tonic::{Request, Response};

use crate::convert::*;
use crate::rpc::{conversations::*, projects::*};
use crate::store;
use crate::store::{HireEnd, HireRec, ProjectRec, now_ms};
use crate::{MailboxService, panes, short_id};
use clankie_types::LinkKind;

/// The project a hire goes to. A configured lead (one that owns projects)
/// hires only into its own projects and must name one when it owns
/// several; any other conversation names the project.
pub(crate) fn attribute(
    state: &store::StateFile,
    conversation_id: &str,
    named: &str,
) -> Result<ProjectRec, ClankieError> {
    let projects: Vec<mailbox_pb::Project> = state.projects.iter().map(project_pb).collect();
    let conversation = state
        .conversations
        .iter()
        .find(|c| c.conversation_id == conversation_id)
        .map(conversation_pb)
        .filter(|c| leads::configured(c, &projects));
    let Some(lead) = conversation else {
        return state
            .projects
            .iter()
            .find(|p| p.project_id == named || p.name == named)
            .cloned()
            .ok_or_else(|| ErrorCode::ProjectNotFound.err(format!("no project {named}")));
    };
    let owned: Vec<&ProjectRec> = state
        .projects
        .iter()
        .zip(&projects)
        .filter(|(_, p)| leads::owns(&lead, p))
        .map(|(r, _)| r)
        .collect();
    let names = || {
        owned
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if named.is_empty() {
        return match owned.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(ErrorCode::NotOwner
                .err("this lead owns no registered project; bind one or name a project")),
            _ => Err(ErrorCode::InvalidArgument.err(format!(
                "this lead owns several projects ({}): name one with --project",
                names()
            ))),
        };
    }
    owned
        .iter()
        .find(|p| p.project_id == named || p.name == named)
        .map(|p| (*p).clone())
        .ok_or_else(|| {
            ErrorCode::NotOwner.err(format!(
                "this lead owns {}; it cannot hire into {named}'s folder",
                names()
            ))
        })
}
/// How one hire starts: the link, a working bubblewrap when the worker
/// sandbox is on, and every linked multiplexer's socket (a confined hire
/// must not ask one for an unconfined pane).
pub(crate) struct Launch {
    link: admission_pb::FleetLink,
    sandbox: Option<sandbox::Sandbox>,
    sockets: Vec<std::path::PathBuf>,
}
impl MailboxService {
    /// The switch and the saved level, read fresh; unreachable reads as
    /// off.
    pub(crate) async fn autonomy(&self) -> auto_pb::Autonomy {
        let call = Call::new(auto_pb::GetSwitchRequest {})
            .timeout(INTERNAL)
            .request();
        match self.inner.auto.clone().get_switch(call).await {
            Ok(r) => r.into_inner(),
            Err(s) => auto_pb::Autonomy {
                readable: false,
                problem: format!("the auto-scheduler cannot be reached: {}", s.message()),
                ..Default::default()
            },
        }
    }

    /// The local link a hire opens in.
    pub(crate) async fn fleet_status(
        &self,
    ) -> Result<admission_pb::FleetStatusResponse, ClankieError> {
        let call = Call::new(admission_pb::FleetStatusRequest {})
            .timeout(INTERNAL)
            .request();
        self.inner
            .admission
            .clone()
            .fleet_status(call)
            .await
            .answer()
    }

    /// Where a hire opens and how it starts.
    pub(crate) async fn launch(&self, link_id: &str) -> Result<Launch, ClankieError> {
        let status = self.fleet_status().await?;
        let sandbox_on = status.settings.as_ref().is_none_or(|s| s.worker_sandbox);
        let sandbox = if sandbox_on {
            Some(sandbox::Sandbox::probe().await?)
        } else {
            None
        };
        let sockets = status
            .links
            .iter()
            .filter(|l| LinkKind::from_wire(l.kind).is_some_and(LinkKind::is_pane_host))
            .map(|l| std::path::PathBuf::from(&l.socket))
            .collect();
        Ok(Launch {
            link: Self::pick_link(status.links, link_id)?,
            sandbox,
            sockets,
        })
    }

    pub(crate) async fn link(
        &self,
        link_id: &str,
    ) -> Result<admission_pb::FleetLink, ClankieError> {
        Self::pick_link(self.fleet_status().await?.links, link_id)
    }

    pub(crate) fn pick_link(
        links: Vec<admission_pb::FleetLink>,
        link_id: &str,
    ) -> Result<admission_pb::FleetLink, ClankieError> {
        let mut local = links.into_iter().filter(|l| {
            LinkKind::from_wire(l.kind).is_some_and(LinkKind::is_pane_host)
                && (link_id.is_empty() || l.link_id == link_id)
        });
        let first = local.next().ok_or_else(|| {
            ErrorCode::NoLinkedSession
                .err("no linked session to hire into: clankie fleet link --tmux SOCKET or --herdr")
        })?;
        if link_id.is_empty() && local.next().is_some() {
            return Err(ErrorCode::InvalidArgument
                .err("several linked sessions: choose one with its link id (--link)"));
        }
        Ok(first)
    }

    pub(crate) async fn hire(
        &self,
        request: Request<mailbox_pb::HireRequest>,
    ) -> Result<Response<mailbox_pb::HireRecord>, ClankieError> {
        self.owner(&request)?;
        let req = request.into_inner();
        if req.command.is_empty() {
            return Err(ErrorCode::InvalidArgument.err("give the command the worker runs"));
        }
        let role = match Role::from_wire(req.role) {
            None | Some(Role::Worker) => Role::Worker,
            Some(Role::Reviewer) => Role::Reviewer,
            Some(Role::Lead) => Role::Lead,
            Some(Role::Owner) => {
                return Err(
                    ErrorCode::InvalidArgument.err("role owner: choose worker, reviewer or lead")
                );
            }
        };
        if let Some(word) = req.command.iter().find(|w| w.chars().any(char::is_control)) {
            // Herdr types the line into a terminal, where ^C or a newline
            // would act before any quoting does.
            return Err(ErrorCode::InvalidArgument.err(format!(
                "a command word holds a control character ({:?}); nothing was started",
                word.escape_default().to_string()
            )));
        }
        match req.harness.as_str() {
            "" | "codex" | "pi" => {}
            "claude"
                if std::path::Path::new(&req.harness_executable).is_absolute()
                    && req.harness_executable.len() <= 4096 => {}
            other => {
                return Err(ErrorCode::InvalidArgument.err(format!(
                    "harness {other:?}: choose claude (with its executable's absolute path), codex, pi or none"
                )));
            }
        }
        let launch = self.launch(&req.link_id).await?;
        let link = launch.link.clone();
        // An autonomous turn reads the switch and the saved level first.
        let autonomy = if req.autonomous {
            Some(self.autonomy().await)
        } else {
            None
        };
        // Hold the store across the cap check and the record, so two hires
        // cannot both take the last place.
        let mut store = self.inner.store.lock().await;
        Self::writable(&store)?;
        let conversation_id = caller(&store.state, &req.conversation_id)?;
        let project = attribute(&store.state, &conversation_id, &req.project)?;
        if let Some(autonomy) = autonomy {
            staffing(&autonomy, &project)?;
        }
        // A local hire opens in a workspace of this machine; one approved
        // for another machine is never opened here.
        let workspace = if req.workspace_id.is_empty() {
            project
                .workspaces
                .iter()
                .find(|w| w.machine.is_empty())
                .ok_or_else(|| {
                    ErrorCode::InvalidArgument.err(format!(
                        "project {} has no workspace on this machine",
                        project.name
                    ))
                })?
        } else {
            project
                .workspaces
                .iter()
                .find(|w| w.workspace_id == req.workspace_id)
                .ok_or_else(|| {
                    ErrorCode::InvalidArgument.err("the project has no such workspace")
                })?
        }
        .clone();
        if !workspace.machine.is_empty() {
            return Err(ErrorCode::InvalidArgument.err(format!(
                "workspace {} is on machine {}; a hire here opens in a workspace of this machine",
                workspace.path, workspace.machine
            )));
        }
        // A conversation has one lead seat; a project one reviewer and its
        // worker cap.
        let working = store
            .state
            .hires
            .iter()
            .filter(|h| h.is_open() && h.role == role)
            .filter(|h| {
                if role == Role::Lead {
                    h.conversation_id == conversation_id
                } else {
                    h.project_id == project.project_id
                }
            })
            .count();
        let cap = if role == Role::Worker {
            project.worker_cap as usize
        } else {
            1
        };
        if working >= cap {
            return Err(ErrorCode::WorkerCapReached.err(format!(
                "{} already has {working} open {role} hire(s), its cap",
                project.name
            )));
        }
        // With the worker sandbox on, the hire starts confined or not at all.
        let command = match &launch.sandbox {
            Some(sandbox) => {
                let profiles: Vec<std::path::PathBuf> =
                    req.profile.iter().map(std::path::PathBuf::from).collect();
                let reach = sandbox::Reach::for_stack(
                    &self.inner.paths,
                    Path::new(&workspace.path),
                    &launch.sockets,
                    &profiles,
                )?;
                reach.prepare().map_err(|e| {
                    ErrorCode::WorkerSandboxUnavailable
                        .err(format!("could not prepare the sandbox's covers: {e}"))
                })?;
                sandbox.wrap(&reach, &req.command)
            }
            None => req.command.clone(),
        };
        // The hire learns where the gateway is, never where the state is:
        // the state folder holds the owner credential. Nothing secret rides
        // in the environment or on the multiplexer's command line.
        let env = vec![
            ("CLANKIE_WORKER_PANE", "1".to_string()),
            ("CLANKIE_OPERATOR_TOKEN", String::new()),
            ("CLANKIE_CAPTAIN_TOKEN", String::new()),
            ("CLANKIE_STATE", String::new()),
            (
                "CLANKIE_GATEWAY_DISCOVERY",
                self.inner.paths.gateway_discovery().display().to_string(),
            ),
        ];
        let pane_id = panes::open(&link, &workspace.path, &env, &command)
            .await
            .map_err(|e| ErrorCode::ServiceUnavailable.err(e.0))?;
        let hire = HireRec {
            hire_id: short_id("hire"),
            conversation_id,
            project_id: project.project_id.clone(),
            role,
            link_id: link.link_id.clone(),
            fleet: link.fleet.clone(),
            pane_id,
            workspace: workspace.path.clone(),
            command: req.command,
            created_at_ms: now_ms(),
            ended: None,
            hand_started: false,
            harvests: 0,
            agent_done: false,
            retire_pending: false,
            occupant_pid: 0,
            occupant_pidfs_id: 0,
            occupant_start_time: 0,
            sandboxed: launch.sandbox.is_some(),
            harness_only_control: req.harness_only_control,
            harness: req.harness.clone(),
            harness_executable: req.harness_executable.clone(),
            ready_at_ms: 0,
            not_ready: String::new(),
            legacy_launch_token: String::new(),
        };
        if let Err(e) = store.change(|s| {
            s.hires.push(hire.clone());
            Ok(())
        }) {
            // The pane must not outlive a hire that was never recorded.
            let _ = panes::close(&link, &hire.pane_id).await;
            return Err(e);
        }
        tracing::info!(hire = %hire.hire_id, project = %project.name, role = role.as_str(), sandboxed = hire.sandboxed, "hired");
        Ok(Response::new(hire_pb(&hire, true)))
    }

    pub(crate) async fn close_hire(
        &self,
        request: Request<mailbox_pb::CloseHireRequest>,
    ) -> Result<Response<mailbox_pb::HireRecord>, ClankieError> {
        self.owner(&request)?;
        let req = request.into_inner();
        let mut store = self.inner.store.lock().await;
        Self::writable(&store)?;
        let caller_id = caller(&store.state, &req.conversation_id)?;
        let index = store
            .state
            .hires
            .iter()
            .position(|h| h.hire_id == req.hire_id)
            .ok_or_else(|| ErrorCode::HireNotFound.err(format!("no hire {}", req.hire_id)))?;
        let hire = store.state.hires[index].clone();
        let owner_present = present(&store.state, &hire.conversation_id);
        // A hire whose lead is gone is adopted by whoever acts on it.
        if owner_present && hire.conversation_id != caller_id {
            return Err(ErrorCode::NotOwner.err(format!(
                "hire {} belongs to conversation {}; only it may close the hire",
                hire.hire_id, hire.conversation_id
            )));
        }
        if hire.is_open() {
            let link = self.link(&hire.link_id).await?;
            panes::close(&link, &hire.pane_id)
                .await
                .map_err(|e| ErrorCode::ServiceUnavailable.err(e.0))?;
        }
        {
            let mut book = self.inner.book.lock().await;
            self.change_book(&mut book, |b| {
                b.pane_gone(&hire.link_id, &hire.pane_id, now_ms());
                Ok(())
            })?;
        }
        let retiring = hire.is_open();
        let out = store.change(|s| {
            let h = &mut s.hires[index];
            h.conversation_id = caller_id;
            if retiring {
                h.ended = Some(HireEnd::Closed);
                // Its tracker bookkeeping is owed until settled
                // (`retirement.rs`).
                h.retire_pending = h.occupant_pidfs_id != 0;
            }
            Ok(h.clone())
        })?;
        // The attribution is the confirmed hire captured while its occupant
        // was proven, and the project's binding as saved now.
        let project = store
            .state
            .projects
            .iter()
            .find(|p| p.project_id == out.project_id)
            .cloned();
        drop(store);
        self.forget_codex_seats(|h| h == out.hire_id).await;
        if out.retire_pending {
            self.retire(&out, project.as_ref(), true).await;
        }
        Ok(Response::new(hire_pb(&out, true)))
    }

    pub(crate) async fn roster(
        &self,
        request: Request<mailbox_pb::RosterRequest>,
    ) -> Result<Response<mailbox_pb::RosterResponse>, ClankieError> {
        self.owner(&request)?;
        // Hires whose pane is gone end, and completions are heard, from one
        // pane listing per linked server.
        let live = self.live_panes().await;
        self.observe(&live).await?;
        // Each open hire's current seat, for its bridge's presence and
        // freshness.
        let seats: std::collections::HashMap<(String, String), String> = {
            let book = self.inner.book.lock().await;
            book.seats
                .iter()
                .filter(|s| !s.gone)
                .map(|s| ((s.link_id.clone(), s.pane_id.clone()), s.seat_id.clone()))
                .collect()
        };
        let store = self.inner.store.lock().await;
        store.readable()?;
        let hires = store
            .state
            .hires
            .iter()
            .map(|h| {
                let mut pb = hire_pb(h, present(&store.state, &h.conversation_id));
                let seat = seats.get(&(h.link_id.clone(), h.pane_id.clone()));
                let (bridge_present, freshness) = match seat {
                    Some(seat) if h.is_open() => {
                        let (present, freshness, _) = self.bridge_view(seat);
                        (present, freshness)
                    }
                    _ => (false, clankie_types::diagnostics::BridgeFreshness::Unknown),
                };
                pb.bridge_present = bridge_present;
                pb.bridge_freshness = freshness.wire();
                pb
            })
            .collect();
        Ok(Response::new(mailbox_pb::RosterResponse { hires }))
    }
}
