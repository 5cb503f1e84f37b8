//! Projects: adding, listing and revision-fenced edits, workspace removal,
//! and how a project routes its tracker calls.

use clankie_proto::auto::v1 as auto_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use tonic::{Request, Response};

use crate::convert::*;
use crate::rpc::conversations::*;
use crate::store;
use crate::store::{ProjectRec, TrackerBinding, WorkspaceRec, now_ms};
use crate::{DEFAULT_WORKER_CAP, MAX_FOCUS, OVERRIDES};
use crate::{MailboxService, short_id};
use clankie_types::TrackerRoute;
use clankie_types::autonomy::AutonomyLevel;

/// The staffing rule of an autonomous turn: the switch on, the owner's saved
/// global autonomy Full, the project on Auto, and its overrides allowing
/// everyday and outward work and lead-owned machine setup. Otherwise the
/// turn may only propose, and the refusal says why.
pub(crate) fn staffing(
    autonomy: &auto_pb::Autonomy,
    project: &ProjectRec,
) -> Result<(), ClankieError> {
    let why = if !autonomy.readable {
        Some("the autonomy switch cannot be read, so it reads as off".to_string())
    } else if !autonomy.on {
        Some("the autonomy switch is off".to_string())
    } else if autonomy.level != AutonomyLevel::Full.wire() {
        Some(format!(
            "the owner's saved global autonomy is {}, not full",
            AutonomyLevel::from_wire(autonomy.level).unwrap_or(AutonomyLevel::Off)
        ))
    } else if !project.auto {
        Some(format!("project {} is not on Auto", project.name))
    } else {
        OVERRIDES
            .iter()
            .find(|k| project.overrides.get(**k) == Some(&false))
            .map(|k| format!("project {}'s overrides do not allow {k} work", project.name))
    };
    match why {
        Some(why) => Err(ErrorCode::ProposeOnly.err(format!(
            "an autonomous turn may only propose this hire: {why}"
        ))),
        None => Ok(()),
    }
}
/// The project named `which` (id or name), if it is still at `expected`.
pub(crate) fn project_at<'a>(
    state: &'a mut store::StateFile,
    which: &str,
    expected: u64,
) -> Result<&'a mut ProjectRec, ClankieError> {
    let project = state
        .projects
        .iter_mut()
        .find(|p| p.project_id == which || p.name == which)
        .ok_or_else(|| ErrorCode::ProjectNotFound.err(format!("no project {which}")))?;
    if project.revision != expected {
        return Err(ErrorCode::StaleRevision.err(format!(
            "the project is at revision {}, not {expected}; read it again",
            project.revision
        )));
    }
    Ok(project)
}
/// Where a project's unpinned tracker calls go: `(route, team, linear
/// project)`, or why they cannot go anywhere.
pub(crate) fn tracker_route(p: &ProjectRec) -> Result<(TrackerRoute, String, String), String> {
    match p.tracker {
        TrackerBinding::Builtin => {
            Ok((TrackerRoute::Builtin, p.tracker_team.clone(), String::new()))
        }
        TrackerBinding::Linear => Ok((
            TrackerRoute::Linear,
            String::new(),
            p.linear_project_id.clone(),
        )),
        TrackerBinding::Unbound
            if !p.workspaces.is_empty()
                && p.workspaces
                    .iter()
                    .all(|w| w.convention == TrackerBinding::Linear) =>
        {
            Ok((
                TrackerRoute::Linear,
                String::new(),
                p.linear_project_id.clone(),
            ))
        }
        _ => Err(format!(
            "project {} has no tracker binding and its workspaces' saved conventions are not all linear: clankie project set {} --tracker builtin|linear",
            p.name, p.name
        )),
    }
}
impl MailboxService {
    pub(crate) async fn add_project(
        &self,
        request: Request<mailbox_pb::AddProjectRequest>,
    ) -> Result<Response<mailbox_pb::Project>, ClankieError> {
        self.owner(&request)?;
        let req = request.into_inner();
        let name = req.name.trim().to_string();
        if !store::valid_project_name(&name) {
            return Err(ErrorCode::InvalidArgument.err(
                "a project name is 1-64 letters, digits, '-', '_' or '.', and not '.' or '..'",
            ));
        }
        // A workspace here must exist; one on another machine is kept as the
        // owner spelled it, normalized for its platform, never resolved here.
        let path = if req.machine.is_empty() {
            let path = std::path::Path::new(&req.workspace);
            if !path.is_absolute() || !path.is_dir() {
                return Err(ErrorCode::InvalidArgument
                    .err("the workspace must be an existing absolute folder"));
            }
            req.workspace.clone()
        } else {
            if !store::valid_project_name(&req.machine) {
                return Err(ErrorCode::InvalidArgument
                    .err("a machine name is 1-64 letters, digits, '-', '_' or '.'"));
            }
            clankie_types::workspace::normalized(&req.workspace, &req.platform)
                .map_err(|why| ErrorCode::InvalidArgument.err(why))?
        };
        let mut store = self.inner.store.lock().await;
        Self::writable(&store)?;
        if !req.lead_conversation_id.is_empty() && !present(&store.state, &req.lead_conversation_id)
        {
            return Err(ErrorCode::ConversationNotFound
                .err(format!("no conversation {}", req.lead_conversation_id)));
        }
        let workspace = WorkspaceRec {
            workspace_id: short_id("ws"),
            path,
            machine: req.machine,
            platform: req.platform,
            convention: TrackerBinding::Unbound,
        };
        let project = store.change(|s| {
            Ok(match s.projects.iter_mut().find(|p| p.name == name) {
                // Adding to an existing project adds a workspace.
                Some(p) => {
                    if p.workspaces
                        .iter()
                        .any(|w| w.path == workspace.path && w.machine == workspace.machine)
                    {
                        return Err(ErrorCode::ProjectExists.err(format!(
                            "{name} already has the workspace {}",
                            req.workspace
                        )));
                    }
                    p.workspaces.push(workspace);
                    p.revision += 1;
                    p.clone()
                }
                None => {
                    let p = ProjectRec {
                        project_id: short_id("prj"),
                        name,
                        workspaces: vec![workspace],
                        lead_conversation_id: req.lead_conversation_id,
                        worker_cap: if req.worker_cap == 0 {
                            DEFAULT_WORKER_CAP
                        } else {
                            req.worker_cap
                        },
                        standing_reviewer: req.standing_reviewer,
                        revision: 1,
                        created_at_ms: now_ms(),
                        tracker: TrackerBinding::Unbound,
                        tracker_team: String::new(),
                        linear_project_id: String::new(),
                        auto: false,
                        focus: String::new(),
                        overrides: Default::default(),
                    };
                    s.projects.push(p.clone());
                    p
                }
            })
        })?;
        Ok(Response::new(project_pb(&project)))
    }

    pub(crate) async fn list_projects(
        &self,
        request: Request<mailbox_pb::ListProjectsRequest>,
    ) -> Result<Response<mailbox_pb::ListProjectsResponse>, ClankieError> {
        self.owner(&request)?;
        let store = self.inner.store.lock().await;
        store.readable()?;
        Ok(Response::new(mailbox_pb::ListProjectsResponse {
            projects: store.state.projects.iter().map(project_pb).collect(),
        }))
    }

    pub(crate) async fn update_project(
        &self,
        request: Request<mailbox_pb::UpdateProjectRequest>,
    ) -> Result<Response<mailbox_pb::Project>, ClankieError> {
        self.owner(&request)?;
        let req = request.into_inner();
        if let Some(f) = &req.focus
            && (f.chars().count() > MAX_FOCUS || f.contains(['\n', '\r']))
        {
            return Err(ErrorCode::InvalidArgument.err(format!(
                "a focus is one line of at most {MAX_FOCUS} characters ({} given)",
                f.chars().count()
            )));
        }
        if let Some(k) = req
            .overrides
            .keys()
            .find(|k| !OVERRIDES.contains(&k.as_str()))
        {
            return Err(ErrorCode::InvalidArgument.err(format!(
                "override {k}: choose one of {}",
                OVERRIDES.join(", ")
            )));
        }
        let tracker = req
            .tracker
            .map(|t| {
                TrackerBinding::from_wire(t).ok_or_else(|| {
                    ErrorCode::InvalidArgument.err(format!(
                        "tracker binding {t}: choose builtin or linear (or unbound)"
                    ))
                })
            })
            .transpose()?;
        let mut conventions = Vec::with_capacity(req.workspace_conventions.len());
        for (which, c) in req.workspace_conventions {
            let c = TrackerBinding::from_wire(c).ok_or_else(|| {
                ErrorCode::InvalidArgument.err(format!(
                    "convention {c}: choose builtin or linear (or unbound)"
                ))
            })?;
            conventions.push((which, c));
        }
        if let Some(u) = &req.linear_project_id
            && !u.is_empty()
            && uuid::Uuid::parse_str(u).is_err()
        {
            return Err(ErrorCode::InvalidArgument.err("a Linear project is named by its UUID"));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store)?;
        let next = store.change(|s| {
            let project = project_at(s, &req.project, req.expected_revision)?;
            let mut next = project.clone();
            if let Some(t) = tracker {
                next.tracker = t;
            }
            if let Some(t) = req.tracker_team {
                next.tracker_team = t;
            }
            if let Some(u) = req.linear_project_id {
                next.linear_project_id = u;
            }
            for (which, convention) in conventions {
                let ws = next
                    .workspaces
                    .iter_mut()
                    .find(|w| w.workspace_id == which || w.path == which)
                    .ok_or_else(|| {
                        ErrorCode::InvalidArgument
                            .err(format!("the project has no workspace {which}"))
                    })?;
                ws.convention = convention;
            }
            if let Some(a) = req.auto {
                next.auto = a;
            }
            if let Some(f) = req.focus {
                next.focus = f;
            }
            for (k, v) in req.overrides {
                next.overrides.insert(k, v);
            }
            if next.tracker == TrackerBinding::Builtin && next.tracker_team.is_empty() {
                return Err(ErrorCode::InvalidArgument.err(
                    "a builtin binding names the tracker team its issues live in (--team KEY)",
                ));
            }
            next.revision += 1;
            *project = next.clone();
            Ok(next)
        })?;
        tracing::info!(project = %next.name, tracker = %next.tracker, "project.updated");
        Ok(Response::new(project_pb(&next)))
    }

    pub(crate) async fn remove_workspace(
        &self,
        request: Request<mailbox_pb::RemoveWorkspaceRequest>,
    ) -> Result<Response<mailbox_pb::Project>, ClankieError> {
        self.owner(&request)?;
        let req = request.into_inner();
        let mut store = self.inner.store.lock().await;
        Self::writable(&store)?;
        let open_hires: Vec<String> = store
            .state
            .hires
            .iter()
            .filter(|h| h.project_id == req.project_id && h.is_open())
            .map(|h| h.workspace.clone())
            .collect();
        let out = store.change(|s| {
            let project = project_at(s, &req.project_id, req.expected_revision)?;
            let index = project
                .workspaces
                .iter()
                .position(|w| w.workspace_id == req.workspace_id)
                .ok_or_else(|| {
                    ErrorCode::InvalidArgument
                        .err(format!("the project has no workspace {}", req.workspace_id))
                })?;
            let ws = &project.workspaces[index];
            if open_hires.contains(&ws.path) {
                return Err(ErrorCode::StaleRevision
                    .err("an open hire works in that workspace; close it first"));
            }
            if ws.convention != TrackerBinding::Unbound {
                return Err(ErrorCode::TrackerConflict.err(format!(
                    "the project's tracker references {} (its saved {} convention); move the binding first: clankie project set {} --revision {} --convention {}=none",
                    ws.path, ws.convention, project.name, project.revision, ws.path
                )));
            }
            // The record goes; the folder on disk is never touched.
            project.workspaces.remove(index);
            project.revision += 1;
            Ok(project.clone())
        })?;
        Ok(Response::new(project_pb(&out)))
    }
}
