//! Who is calling: the pane an admission ticket proves, and the native seat
//! that pane holds.

use clankie_runtime::clients::Answer as _;
use clankie_runtime::clients::{Call, INTERNAL};
use clankie_types::Role;
use clankie_types::TrackerRoute;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::common::v1::AdmissionMode;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::grpc::{self};
use clankie_runtime::{ClankieError, ErrorCode};
use tonic::{Request, Response};

use crate::rpc::projects::*;
use crate::{codex_seats, seats};

/// A seat as observed for one request.
pub(crate) struct Observed {
    pub seat: seats::SeatRec,
    pub settings: admission_pb::FleetSettings,
    /// The connection's owner is the harness itself.
    pub owner_is_harness: bool,
    /// The agent's arguments, as the kernel keeps them.
    pub agent_argv: Vec<String>,
    /// The connection owner's parent (a Codex bridge's app-server).
    pub owner_parent: Option<codex_seats::Proc>,
    /// The connection owner itself: the bridge (or the harness polling for
    /// itself), a seat's observation cohort.
    pub owner: Option<codex_seats::Proc>,
}

fn proc_of(p: &admission_pb::ProcessIdentity) -> codex_seats::Proc {
    codex_seats::Proc {
        pid: p.pid,
        pidfs_id: p.pidfs_id,
        start_time: p.start_time,
    }
}
use crate::MailboxService;
use crate::store::now_ms;

impl MailboxService {
    /// The pane principal behind a worker request's admission ticket, its
    /// proof rechecked.
    pub(crate) async fn pane_principal<T>(
        &self,
        req: &Request<T>,
    ) -> Result<clankie_proto::common::v1::Principal, ClankieError> {
        self.ticket_pane_as(req, true).await
    }

    /// The pane a request's ticket was issued to, looked up without a
    /// fresh observation: only for what the gateway asks while serving a
    /// request it already rechecked (a seat's own tool families).
    pub(crate) async fn ticket_pane<T>(
        &self,
        req: &Request<T>,
    ) -> Result<clankie_proto::common::v1::Principal, ClankieError> {
        self.ticket_pane_as(req, false).await
    }

    /// The pane principal of a request's ticket: admission's `Recheck`
    /// when `recheck`, else its lookup (`TicketPrincipal`). Bearer tickets
    /// name no pane.
    async fn ticket_pane_as<T>(
        &self,
        req: &Request<T>,
        recheck: bool,
    ) -> Result<clankie_proto::common::v1::Principal, ClankieError> {
        let ticket = Self::ticket_of(req)?;
        let call = Call::new(admission_pb::RecheckRequest { ticket })
            .timeout(INTERNAL)
            .request();
        let mut admission = self.inner.admission.clone();
        let answer = if recheck {
            admission.recheck(call).await
        } else {
            admission.ticket_principal(call).await
        };
        let principal = answer.answer()?.principal.unwrap_or_default();
        if principal.mode != AdmissionMode::Local as i32 || principal.pane_id.is_empty() {
            return Err(ErrorCode::LocalProcessMembershipRequired
                .err("this needs a proven pane; a bearer link has none"));
        }
        Ok(principal)
    }

    pub(crate) fn ticket_of<T>(req: &Request<T>) -> Result<String, ClankieError> {
        grpc::ticket(req.metadata())
            .map(str::to_string)
            .ok_or_else(|| {
                ErrorCode::FleetCredentialRequired.err("the request carries no admission ticket")
            })
    }

    /// The native seat behind a request: a proven pane process under the
    /// pane's foreground agent, observed fresh (never reused between
    /// requests). Returns the seat and the fleet settings.
    pub(crate) async fn native_seat<T>(
        &self,
        req: &Request<T>,
    ) -> Result<(seats::SeatRec, admission_pb::FleetSettings), ClankieError> {
        self.observed_seat(req).await.map(|o| (o.seat, o.settings))
    }

    /// A seat observed ([`Self::observe_seat`]) and then recorded
    /// ([`Self::record_seat`]).
    async fn observed_seat<T>(&self, req: &Request<T>) -> Result<Observed, ClankieError> {
        let observed = self.observe_seat(req).await?;
        self.record_seat(&observed.seat).await?;
        Ok(observed)
    }

    /// The seat behind a request as admission observes it now, held against
    /// its hire (the launched harness, a Codex's registration). Writes
    /// nothing.
    async fn observe_seat<T>(&self, req: &Request<T>) -> Result<Observed, ClankieError> {
        let ticket = Self::ticket_of(req)?;
        // One call: admission rechecks the ticket's proof, then observes the
        // seat fresh (bearer tickets have no seat).
        let call = Call::new(admission_pb::RecheckRequest { ticket })
            .timeout(INTERNAL)
            .request();
        let seat = self
            .inner
            .admission
            .clone()
            .observe_ticket_seat(call)
            .await
            .answer()
            .map_err(|e| {
                if e.code == ErrorCode::LocalProcessMembershipRequired {
                    ErrorCode::NativeSeatRequired.err(format!(
                        "a native seat is a proven pane process under the pane's foreground agent: {}",
                        e.message
                    ))
                } else {
                    e
                }
            })?;
        // A hire's seat is the harness it launched, or no seat at all.
        let mismatch = {
            let store = self.inner.store.lock().await;
            store
                .state
                .hire_in(&seat.link_id, &seat.pane_id)
                .filter(|h| !h.launched_as(&seat.launcher_argv, &seat.agent_executable))
                .map(|h| (h.hire_id.clone(), h.harness.clone()))
        };
        if let Some((hire, harness)) = mismatch {
            tracing::info!(%hire, %harness, "mailbox.seat.launcher_mismatch");
            self.not_ready((&seat.link_id, &seat.pane_id), "launcher_mismatch")
                .await;
            return Err(ErrorCode::LauncherMismatch.err(format!(
                "hire {hire} runs {harness} through `clankie claude`, the exact launcher; this pane's foreground is not that launcher running the recorded command with the recorded Claude as its direct child"
            )));
        }
        let owner_parent = seat.owner_parent.as_ref().map(proc_of);
        let owner = seat.owner.as_ref().map(proc_of);
        self.hold_codex_registration(&seat, owner_parent).await?;
        let agent_argv = seat.agent_argv.clone();
        let settings = seat.settings.unwrap_or_default();
        let owner_is_harness = seat.owner_is_harness;
        let agent = seat.agent.unwrap_or_default();
        let rec = seats::SeatRec {
            seat_id: seats::seat_id(
                &seat.link_id,
                &seat.pane_id,
                agent.pidfs_id,
                agent.start_time,
                agent.pid,
            ),
            fleet: seat.fleet,
            link_id: seat.link_id,
            pane_id: seat.pane_id,
            agent_pid: agent.pid,
            agent_pidfs_id: agent.pidfs_id,
            agent_start_time: agent.start_time,
            agent_executable: seat.agent_executable,
            gone: false,
            recorded_at_ms: 0,
        };
        Ok(Observed {
            seat: rec,
            settings,
            owner_is_harness,
            agent_argv,
            owner_parent,
            owner,
        })
    }

    /// Records an observed seat in the seat book, and as its pane's hire's
    /// occupant when that is not recorded yet. A seat in a pane Clankie
    /// did not hire into becomes a hand-started hire: listed unowned, and
    /// adopted by the first conversation that messages it.
    async fn record_seat(&self, rec: &seats::SeatRec) -> Result<(), ClankieError> {
        {
            let mut book = self.inner.book.lock().await;
            if book.would_change(rec) {
                self.change_book(&mut book, |b| Ok(b.upsert_seat(rec.clone(), now_ms())))?;
            }
        }
        // A hire records its pane under this lock before any seat in that
        // pane is recorded here, so a hired pane never reads as by hand.
        let mut store = self.inner.store.lock().await;
        if store.unreadable() {
            return Ok(());
        }
        match store.state.hire_in(&rec.link_id, &rec.pane_id) {
            Some(h) if h.occupant_pidfs_id == 0 => {
                store.change(|s| {
                    if let Some(h) = s.hire_in_mut(&rec.link_id, &rec.pane_id) {
                        h.occupant_pid = rec.agent_pid;
                        h.occupant_pidfs_id = rec.agent_pidfs_id;
                        h.occupant_start_time = rec.agent_start_time;
                    }
                    Ok(())
                })?;
            }
            Some(_) => {}
            None => {
                let hire =
                    crate::store::HireRec::hand_started(crate::short_id("hire"), rec, now_ms());
                store.change(|s| {
                    s.hires.push(hire.clone());
                    Ok(())
                })?;
                tracing::info!(hire = %hire.hire_id, "mailbox.hire.hand_started");
            }
        }
        Ok(())
    }

    /// A ready Codex hire's every request holds against its registration:
    /// the same app-server, pane and foreground Codex, across restarts.
    async fn hold_codex_registration(
        &self,
        seat: &admission_pb::SeatIdentity,
        server: Option<codex_seats::Proc>,
    ) -> Result<(), ClankieError> {
        let Some(hire) = self.registered_codex(&seat.link_id, &seat.pane_id).await else {
            return Ok(());
        };
        let seen = codex_seats::Seen {
            link_id: &seat.link_id,
            pane_id: &seat.pane_id,
            server,
            occupant: seat.agent.as_ref().map(proc_of).unwrap_or_default(),
        };
        let verdict = match self.inner.codex_seats.lock().await.find(&hire) {
            Some(registered) => registered.check(&seen),
            None => Err(codex_seats::Mismatch::Unrestored),
        };
        verdict.map_err(|m| {
            let reason = m.reason();
            tracing::info!(%hire, reason, "mailbox.seat.codex_unverified");
            ErrorCode::CodexSeatUnverified.err(match m {
                codex_seats::Mismatch::Unrestored => format!(
                    "hire {hire}'s Codex seat registration was not restored ({reason}); close the hire and hire again"
                ),
                _ => format!(
                    "hire {hire} is not the Codex seat that registered ({reason}); a replacement never takes an earlier worker's seat"
                ),
            })
        })
    }

    /// For the routes that need only the pane proof (reports, the seat's
    /// tool list): a pane holding a ready Codex hire still answers only as
    /// that registered seat.
    pub(crate) async fn hold_codex_pane<T>(
        &self,
        req: &Request<T>,
        principal: &clankie_proto::common::v1::Principal,
    ) -> Result<(), ClankieError> {
        if self
            .registered_codex(&principal.link_id, &principal.pane_id)
            .await
            .is_some()
        {
            self.observe_seat(req).await?;
        }
        Ok(())
    }

    /// The ready Codex hire in a pane, whose requests hold against its
    /// registration.
    async fn registered_codex(&self, link_id: &str, pane_id: &str) -> Option<String> {
        let store = self.inner.store.lock().await;
        store
            .state
            .hire_in(link_id, pane_id)
            .filter(|h| h.is_registered_codex())
            .map(|h| h.hire_id.clone())
    }

    /// The native seat behind a seat-mailbox request. A hire that asked
    /// for it answers only its harness process itself: a process the model
    /// runs in the pane passes the pane proof but is not the harness.
    pub(crate) async fn control_seat<T>(&self, req: &Request<T>) -> Result<Observed, ClankieError> {
        let observed = self.observed_seat(req).await?;
        let (seat, owner_is_harness) = (&observed.seat, observed.owner_is_harness);
        let harness_only = {
            let store = self.inner.store.lock().await;
            store
                .state
                .hire_in(&seat.link_id, &seat.pane_id)
                .is_some_and(|h| h.harness_only())
        };
        if harness_only && !owner_is_harness {
            return Err(ErrorCode::HarnessProcessRequired.err(
                "this seat's mailbox answers only its harness process, not a process it started",
            ));
        }
        Ok(observed)
    }

    pub(crate) async fn resolve_caller(
        &self,
        request: Request<mailbox_pb::ResolveCallerRequest>,
    ) -> Result<Response<mailbox_pb::CallerInfo>, ClankieError> {
        // The owner's route: the owner credential and no ticket.
        let owner = grpc::ticket(request.metadata()).is_none()
            && self.inner.owner.verify(request.metadata()).is_ok();
        let seat = if owner {
            None
        } else {
            match self.native_seat(&request).await {
                Ok((seat, _)) => Some(seat),
                Err(e) if e.code == ErrorCode::NativeSeatRequired => None,
                Err(e) => return Err(e),
            }
        };
        let mut info = mailbox_pb::CallerInfo::default();
        let hire = match &seat {
            Some(seat) => self.hire_of(seat).await.filter(|h| {
                h.occupant_pidfs_id == seat.agent_pidfs_id
                    && h.occupant_start_time == seat.agent_start_time
            }),
            None => None,
        };
        match (&seat, &hire) {
            (_, Some(h)) => {
                info.confirmed = true;
                info.hire_id = h.hire_id.clone();
                info.project_id = h.project_id.clone();
                info.conversation_id = h.conversation_id.clone();
                info.role = h.role.wire();
                info.actor = match h.role {
                    Role::Lead => format!("lead:{}", h.conversation_id),
                    _ => format!("hire:{}", h.hire_id),
                };
            }
            (Some(seat), None) => {
                info.role = Role::Worker.wire();
                info.actor = format!("fleet:{}:pane:{}", seat.fleet, seat.pane_id);
            }
            (None, None) if owner => {
                info.role = Role::Owner.wire();
                info.actor = "owner".into();
            }
            (None, None) => {
                // A bearer or an unverified pane: the admitted principal.
                let ticket = Self::ticket_of(&request)?;
                let call = Call::new(admission_pb::RecheckRequest { ticket })
                    .timeout(INTERNAL)
                    .request();
                let principal = self
                    .inner
                    .admission
                    .clone()
                    .recheck(call)
                    .await
                    .answer()?
                    .principal
                    .unwrap_or_default();
                info.role = Role::Worker.wire();
                // A remote machine's pane is named with its machine.
                info.actor = clankie_runtime::principal::actor(&principal);
            }
        }
        let repo = request.into_inner().repo;
        let store = self.inner.store.lock().await;
        let target = if !repo.is_empty() {
            let found = store.state.projects.iter().find(|p| {
                p.project_id == repo
                    || p.name == repo
                    || p.workspaces.iter().any(|w| w.path == repo)
            });
            match found {
                Some(p) => Some(Ok(p)),
                None => Some(Err(format!(
                    "repo {repo} names no registered project or workspace"
                ))),
            }
        } else if let Some(h) = &hire {
            match store
                .state
                .projects
                .iter()
                .find(|p| p.project_id == h.project_id)
            {
                Some(p) => Some(Ok(p)),
                None => Some(Err("the hire's project is gone".to_string())),
            }
        } else {
            None
        };
        match target {
            _ if store.unreadable() => {
                info.route_problem = "the project registry cannot be read here".into();
            }
            None => info.route = TrackerRoute::Legacy.wire(),
            Some(Err(problem)) => info.route_problem = problem,
            Some(Ok(p)) => {
                info.route_project = p.name.clone();
                match tracker_route(p) {
                    Ok((route, team, linear)) => {
                        info.route = route.wire();
                        info.route_team = team;
                        info.route_linear_project = linear;
                    }
                    Err(problem) => info.route_problem = problem,
                }
            }
        }
        Ok(Response::new(info))
    }
}
