//! A closed hire's tracker bookkeeping, under the project's tracker as
//! saved at each attempt:
//! - a built-in team: the hire's live leases on its issues are released and
//!   each issue gets a `released` event;
//! - a saved Linear route (or a legacy project whose workspaces' saved
//!   conventions are all Linear): the hire's route leases in that project
//!   are released, each under the connected resource it was taken with;
//! - an ambiguous or missing binding, or a project that is gone: no issue
//!   effects (refused, never guessed).
//!
//! Each effect has a receipt of its own (`retire:<hire>:<key>:<what>`, kept
//! by the tracker). The hire is marked `retire_pending` as it closes and
//! stays so until the tracker answered: a failed attempt (the tracker down
//! or too slow) is retried by the mailbox's sweep with the same receipts,
//! so an effect that did apply is never applied twice.

use std::time::Duration;

use clankie_runtime::clients::Answer as _;
use clankie_runtime::clients::Call;

use crate::MailboxService;
use clankie_types::TrackerRoute;

use crate::rpc::projects::tracker_route;
use crate::store::{HireRec, ProjectRec};

/// How long one attempt waits for the tracker.
const ATTEMPT: Duration = Duration::from_secs(10);

impl MailboxService {
    /// One attempt at a closed hire's bookkeeping; `first` says whether it
    /// is the close's own (a retry's failure is not logged again). Settled
    /// (or owed nothing) clears the hire's `retire_pending`.
    pub(crate) async fn retire(&self, hire: &HireRec, project: Option<&ProjectRec>, first: bool) {
        // Each attempt resolves the project's tracker as saved now.
        let (scope_team, linear_project) = match project.map(|p| (p, tracker_route(p))) {
            Some((_, Ok((TrackerRoute::Builtin, team, _)))) if !team.is_empty() => {
                (team, String::new())
            }
            Some((p, Ok((TrackerRoute::Linear, _, _)))) => (String::new(), p.name.clone()),
            Some((_, Err(problem))) => {
                // Unavailable or ambiguous bindings refuse issue effects.
                tracing::info!(
                    hire = %hire.hire_id,
                    %problem,
                    "hire.retired: the project's tracker binding is ambiguous; issue effects refused"
                );
                return self.retired(&hire.hire_id).await;
            }
            Some((p, Ok(_))) => {
                tracing::info!(
                    hire = %hire.hire_id,
                    tracker = %p.tracker,
                    "hire.retired: no tracker team bound; no issue effects"
                );
                return self.retired(&hire.hire_id).await;
            }
            None => {
                tracing::info!(hire = %hire.hire_id, "hire.retired: project gone; no issue effects");
                return self.retired(&hire.hire_id).await;
            }
        };
        let req = Call::new(clankie_proto::tracker::v1::RetireHireRequest {
            actor: format!("hire:{}", hire.hire_id),
            hire_id: hire.hire_id.clone(),
            scope_team,
            linear_project,
        })
        .timeout(ATTEMPT)
        .request();
        match self.inner.tracker.clone().retire_hire(req).await.answer() {
            Ok(r) => {
                tracing::info!(
                    hire = %hire.hire_id,
                    released = r.released.len(),
                    "hire.retired"
                );
                self.retired(&hire.hire_id).await;
            }
            Err(e) if first => tracing::warn!(
                hire = %hire.hire_id,
                reason = %e.code,
                "hire.retire_failed: retried until the tracker answers"
            ),
            Err(e) => {
                tracing::debug!(hire = %hire.hire_id, reason = %e.code, "hire.retire_retry_failed")
            }
        }
    }

    /// The hire's bookkeeping is settled.
    async fn retired(&self, hire_id: &str) {
        let mut store = self.inner.store.lock().await;
        let owed = store
            .state
            .hires
            .iter()
            .any(|h| h.hire_id == hire_id && h.retire_pending);
        if !owed || store.unreadable() {
            return;
        }
        let cleared = store.change(|s| {
            for h in s.hires.iter_mut().filter(|h| h.hire_id == hire_id) {
                h.retire_pending = false;
            }
            Ok(())
        });
        if let Err(e) = cleared {
            tracing::warn!(hire = %hire_id, reason = e.code.as_str(), "hire.retire_unrecorded");
        }
    }

    /// Tries once more every retirement still owed.
    pub(crate) async fn retry_retirements(&self) {
        let owed: Vec<(HireRec, Option<ProjectRec>)> = {
            let store = self.inner.store.lock().await;
            store
                .state
                .hires
                .iter()
                .filter(|h| h.retire_pending)
                .map(|h| {
                    let project = store
                        .state
                        .projects
                        .iter()
                        .find(|p| p.project_id == h.project_id)
                        .cloned();
                    (h.clone(), project)
                })
                .collect()
        };
        for (hire, project) in owed {
            self.retire(&hire, project.as_ref(), false).await;
        }
    }
}
