//! A retired hire's issue bookkeeping (the mailbox asks, once per effect
//! until the tracker answers): its live leases are released, each effect
//! under its own receipt `retire:<hire>:<key>:<what>`, so a repeat writes
//! nothing.
//!
//! - A built-in project: the hire's leases on the team's issues, each with a
//!   `released` event. The key is the issue's UUID as first observed.
//! - A saved Linear route: the hire's route leases in that Linear project,
//!   each released under the connected resource it was taken with. A lease
//!   is never moved to another resource or to a built-in key, and nothing is
//!   written to Linear: retirement grants no human identity.

use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use sha2::Digest as _;

use crate::service::{TrackerService, store_refusal};
use crate::store::{LeaseSlot, PostIssueEvent, SaveLease, Store};
use crate::tools::Caller;
use crate::vocabulary::Role;

impl TrackerService {
    /// Releases what the hire holds; the issues (or route references) it
    /// released.
    pub(crate) async fn retire(
        &self,
        req: tracker_pb::RetireHireRequest,
    ) -> Result<Vec<String>, ClankieError> {
        if !req.actor.starts_with("hire:") || req.hire_id.is_empty() {
            return Err(
                ErrorCode::InvalidArgument.err("retirement names a hire actor and its hire id")
            );
        }
        if !req.scope_team.is_empty() && !req.linear_project.is_empty() {
            return Err(ErrorCode::InvalidArgument.err(
                "a retirement settles one project's tracker: a built-in team or a Linear project",
            ));
        }
        let (released, _) = self
            .with_store(move |s| {
                let caller = Caller {
                    actor: req.actor.clone(),
                    role: Role::Worker,
                };
                if req.linear_project.is_empty() {
                    builtin(s, &caller, &req)
                } else {
                    route(s, &caller, &req)
                }
                .map_err(store_refusal)
            })
            .await?;
        Ok(released)
    }
}

/// The receipt of one effect on one key.
fn receipt(hire: &str, key: &str, what: &str) -> Option<String> {
    Some(format!("retire:{hire}:{key}:{what}"))
}

fn builtin(
    s: &mut Store,
    caller: &Caller,
    req: &tracker_pb::RetireHireRequest,
) -> Result<Vec<String>, crate::store::StoreError> {
    let scope = if req.scope_team.is_empty() {
        None
    } else {
        Some(s.team(&req.scope_team)?.id)
    };
    let mut released = Vec::new();
    for uuid in s.leases_held_by(&req.actor)? {
        let issue = s.issue(&uuid)?;
        if scope.as_ref().is_some_and(|t| *t != issue.team_id) {
            continue;
        }
        s.save_lease(
            caller,
            SaveLease {
                issue_id: uuid.clone(),
                release: Some(true),
                idempotency_key: receipt(&req.hire_id, &uuid, "lease"),
                ..Default::default()
            },
        )?;
        s.post_issue_event(
            caller,
            PostIssueEvent {
                issue_id: uuid.clone(),
                stage: "released".into(),
                body: Some(format!(
                    "Hire {} was retired; its lease is released. The issue keeps its state.",
                    req.hire_id
                )),
                evidence_bundle_id: None,
                idempotency_key: receipt(&req.hire_id, &uuid, "event"),
            },
        )?;
        released.push(issue.identifier);
    }
    Ok(released)
}

fn route(
    s: &mut Store,
    caller: &Caller,
    req: &tracker_pb::RetireHireRequest,
) -> Result<Vec<String>, crate::store::StoreError> {
    let project = &req.linear_project;
    let mut released = Vec::new();
    for (resource, reference) in s.route_leases_held_by(&req.actor, project)? {
        let key = format!("linear:{resource}:{project}/{reference}");
        // The route key can be longer than a receipt key may be; its digest
        // names it exactly.
        let digest = hex::encode(&sha2::Sha256::digest(key.as_bytes())[..20]);
        let slot = LeaseSlot::Route {
            resource,
            project: project.clone(),
        };
        s.save_lease_in(
            caller,
            &slot,
            SaveLease {
                issue_id: reference,
                release: Some(true),
                idempotency_key: receipt(&req.hire_id, &digest, "lease"),
                ..Default::default()
            },
        )?;
        released.push(key);
    }
    Ok(released)
}
