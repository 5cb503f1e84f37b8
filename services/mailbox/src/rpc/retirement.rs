//! A closed hire's tracker bookkeeping: its live leases in the project's
//! built-in team are released and each issue gets a `released` event, each
//! effect under a receipt of its own (`retire:<hire>:<issue>:<what>`, kept
//! by the tracker). The hire is marked `retire_pending` as it closes and
//! stays so until the tracker answered: a failed attempt (the tracker down
//! or too slow) is retried by the mailbox's sweep with the same receipts,
//! so an effect that did apply is never applied twice. A project whose
//! tracker is not built in here, or that is gone, owes no issue effects.

use std::time::Duration;

use clankie_runtime::clients::Answer as _;
use clankie_runtime::clients::Call;

use crate::MailboxService;
use crate::store::{HireRec, ProjectRec, TrackerBinding};

/// How long one attempt waits for the tracker.
const ATTEMPT: Duration = Duration::from_secs(10);

impl MailboxService {
    /// One attempt at a closed hire's bookkeeping; `first` says whether it
    /// is the close's own (a retry's failure is not logged again). Settled
    /// (or owed nothing) clears the hire's `retire_pending`.
    pub(crate) async fn retire(&self, hire: &HireRec, project: Option<&ProjectRec>, first: bool) {
        let team = match project {
            Some(p) if p.tracker == TrackerBinding::Builtin && !p.tracker_team.is_empty() => {
                p.tracker_team.clone()
            }
            Some(p) => {
                tracing::info!(
                    hire = %hire.hire_id,
                    tracker = %p.tracker,
                    "hire.retired: no built-in tracker binding; no issue effects"
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
            scope_team: team,
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
