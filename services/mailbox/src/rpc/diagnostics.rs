//! Seat diagnostics (seed 003, "Native discovery and diagnostics"): what
//! the mailbox saw of each live seat's bridge, for `clankie doctor` and the
//! roster. Project eligibility is kept apart from tools (no project proof
//! never denies fleet tools); bridge presence apart from freshness; the
//! served catalog beside the one the current bridge process reported.
//! Observations only: nothing here grants or refuses anything.

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::ClankieError;
use clankie_runtime::clients::{Call, INTERNAL};
use clankie_types::Role;
use clankie_types::diagnostics::{BridgeFreshness, Eligibility, NativeTools};
use clankie_types::fleet::FleetTool;
use tonic::{Request, Response};

use crate::MailboxService;
use crate::bridges::Seen;
use crate::rpc::readiness::{Extra, served};
use crate::rpc::seats::ROUTE_FRESH;

/// A bridge's start against the service's: a reload hint, unknown where
/// either start is missing.
pub(crate) fn freshness(seen: Option<&Seen>, service_started: Option<u64>) -> BridgeFreshness {
    match (seen.and_then(|s| s.owner), service_started) {
        (Some(owner), Some(service)) if owner.start_time != 0 && service != 0 => {
            if owner.start_time < service {
                BridgeFreshness::OlderThanRuntime
            } else {
                BridgeFreshness::Current
            }
        }
        _ => BridgeFreshness::Unknown,
    }
}

/// What the reported tools say against the served ones: verified only when
/// a list was reported and it is exactly the served fleet tools.
fn native_tools(served: &[&str], reported: &[String]) -> (NativeTools, Vec<String>) {
    if reported.is_empty() {
        return (NativeTools::NotVerified, Vec::new());
    }
    let missing: Vec<String> = served
        .iter()
        .filter(|s| !reported.iter().any(|r| r == *s))
        .map(|s| s.to_string())
        .collect();
    let extra = reported
        .iter()
        .any(|r| FleetTool::parse(r).is_some() && !served.contains(&r.as_str()));
    if missing.is_empty() && !extra {
        (NativeTools::Verified, missing)
    } else {
        (NativeTools::Mismatch, missing)
    }
}

impl MailboxService {
    /// The seat's bridge presence and freshness, as the roster shows them,
    /// and its current cohort: one read of the observations.
    pub(crate) fn bridge_view(&self, seat_id: &str) -> (bool, BridgeFreshness, Option<Seen>) {
        let bridges = self.inner.bridges.lock();
        let seen = bridges.seen(seat_id);
        let present = bridges.reachable(seat_id, ROUTE_FRESH, std::time::Instant::now());
        (present, freshness(seen, self.inner.started), seen.cloned())
    }

    pub(crate) async fn seat_diagnostics(
        &self,
        request: Request<mailbox_pb::SeatDiagnosticsRequest>,
    ) -> Result<Response<mailbox_pb::SeatDiagnosticsResponse>, ClankieError> {
        self.owner(&request)?;
        let call = Call::new(admission_pb::FleetStatusRequest {})
            .timeout(INTERNAL)
            .request();
        // Without the settings nothing is served for sure: every seat reads
        // not verified rather than a guess.
        let settings = self
            .inner
            .admission
            .clone()
            .fleet_status(call)
            .await
            .ok()
            .and_then(|r| r.into_inner().settings);
        let live: Vec<_> = {
            let book = self.inner.book.lock().await;
            book.seats.iter().filter(|s| !s.gone).cloned().collect()
        };
        let store = self.inner.store.lock().await;
        let mut seats = Vec::with_capacity(live.len());
        for seat in live {
            let hire = store
                .state
                .hire_in(&seat.link_id, &seat.pane_id)
                .filter(|h| !h.hand_started);
            let extra = Extra {
                reviews: hire.is_some_and(|h| {
                    store
                        .state
                        .projects
                        .iter()
                        .any(|p| p.project_id == h.project_id && p.standing_reviewer)
                }),
                lead: hire.is_some_and(|h| h.role == Role::Lead),
            };
            let served_tools = settings
                .as_ref()
                .map(|s| served(s, extra))
                .unwrap_or_default();
            let (present, fresh, seen) = self.bridge_view(&seat.seat_id);
            let reported = seen.as_ref().map(|s| s.tools.clone()).unwrap_or_default();
            let (native, missing) = match settings {
                Some(_) => native_tools(&served_tools, &reported),
                None => (NativeTools::NotVerified, Vec::new()),
            };
            seats.push(mailbox_pb::SeatDiagnostic {
                seat_id: seat.seat_id,
                fleet: seat.fleet,
                link_id: seat.link_id,
                pane_id: seat.pane_id,
                hire_id: hire.map(|h| h.hire_id.clone()).unwrap_or_default(),
                project_id: hire.map(|h| h.project_id.clone()).unwrap_or_default(),
                eligibility: match hire {
                    Some(_) => Eligibility::Project,
                    None => Eligibility::Unproven,
                }
                .wire(),
                native_tools: native.wire(),
                bridge_present: present,
                last_poll_at_ms: seen.as_ref().map_or(0, |s| s.polled_at_ms),
                bridge_freshness: fresh.wire(),
                served_tools: served_tools.iter().map(|s| s.to_string()).collect(),
                tools_reported: !reported.is_empty(),
                reported_tools: reported,
                missing_tools: missing,
                cohorts: seen.as_ref().map_or(0, |s| s.cohorts),
            });
        }
        Ok(Response::new(mailbox_pb::SeatDiagnosticsResponse { seats }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex_seats::Proc;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn verified_needs_a_reported_list_equal_to_the_served_fleet_tools() {
        let served = ["clankie_tools", "clankie_call", "message_clankie"];
        assert_eq!(native_tools(&served, &[]).0, NativeTools::NotVerified);
        assert_eq!(
            native_tools(&served, &names(&served)).0,
            NativeTools::Verified
        );
        let (word, missing) = native_tools(&served, &names(&["message_clankie"]));
        assert_eq!(word, NativeTools::Mismatch);
        assert_eq!(missing, names(&["clankie_tools", "clankie_call"]));
        let mut extra = names(&served);
        extra.push("message_peer".into());
        assert_eq!(native_tools(&served, &extra).0, NativeTools::Mismatch);
    }

    #[test]
    fn a_bridge_older_than_the_service_is_a_reload_hint_and_missing_starts_are_unknown() {
        let mut bridges = crate::bridges::Bridges::default();
        let at = std::time::Instant::now();
        let owner = |start_time| {
            Some(Proc {
                pid: 1,
                pidfs_id: 1,
                start_time,
            })
        };
        bridges.note("old", owner(50), &[], at, 1);
        bridges.note("new", owner(150), &[], at, 1);
        bridges.note("unknown", owner(0), &[], at, 1);
        let f = |seat| freshness(bridges.seen(seat), Some(100));
        assert_eq!(f("old"), BridgeFreshness::OlderThanRuntime);
        assert_eq!(f("new"), BridgeFreshness::Current);
        assert_eq!(f("unknown"), BridgeFreshness::Unknown);
        assert_eq!(f("never"), BridgeFreshness::Unknown);
        assert_eq!(
            freshness(bridges.seen("old"), None),
            BridgeFreshness::Unknown
        );
    }
}
