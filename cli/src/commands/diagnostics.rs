//! The doctor's observations of the fleet (seed 003, "Native discovery and
//! diagnostics"): each live seat's eligibility, native tools, bridge
//! presence and freshness, its served and reported catalogs and its stalled
//! calls; each account's state with its last error; the census helper's
//! queue and the time since the last good proof. Observations grant
//! nothing and prove nothing beyond what they name.

use clankie_proto::common::v1::{AdmissionMode, Principal};
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::diagnostics::{BridgeFreshness, Eligibility, NativeTools};
use serde_json::{Value, json};

use crate::support::clients;
use crate::support::output::field;

/// The calls of a seat's pane that are stalled, with their real reason.
fn stalled_of(
    seat: &mailbox_pb::SeatDiagnostic,
    stalled: &[mcphost_pb::StalledCall],
) -> Vec<Value> {
    let owner = clankie_runtime::principal::owner_key(&Principal {
        fleet_id: seat.fleet.clone(),
        pane_id: seat.pane_id.clone(),
        mode: AdmissionMode::Local as i32,
        link_id: seat.link_id.clone(),
        machine: String::new(),
    });
    stalled
        .iter()
        .filter(|c| c.owner == owner)
        .map(|c| {
            json!({
                "receiptId": c.receipt_id,
                "name": c.name,
                "state": if c.settled { "uncertain" } else { "dispatched" },
                "reason": c.detail,
                "dispatchedAtMs": c.dispatched_at_ms,
            })
        })
        .collect()
}

fn seat_json(seat: &mailbox_pb::SeatDiagnostic, stalled: &[mcphost_pb::StalledCall]) -> Value {
    json!({
        "seatId": seat.seat_id,
        "paneId": seat.pane_id,
        "linkId": seat.link_id,
        "hireId": (!seat.hire_id.is_empty()).then_some(&seat.hire_id),
        "projectId": (!seat.project_id.is_empty()).then_some(&seat.project_id),
        "eligibility": {
            "state": Eligibility::wire_word(seat.eligibility),
            // Missing or unsupported project proof never denies fleet tools.
            "deniesFleetTools": false,
        },
        "nativeTools": NativeTools::wire_word(seat.native_tools),
        "bridge": {
            "present": seat.bridge_present,
            "freshness": BridgeFreshness::wire_word(seat.bridge_freshness),
            "lastPollAtMs": (seat.last_poll_at_ms != 0).then_some(seat.last_poll_at_ms),
            "cohorts": seat.cohorts,
        },
        "workerTools": {
            "served": seat.served_tools,
            "reported": seat.tools_reported.then_some(&seat.reported_tools),
            "missing": seat.missing_tools,
            "stalledCalls": stalled_of(seat, stalled),
        },
    })
}

/// Every live seat as the mailbox observed it, with mcp-host's stalled
/// calls by pane. None when the mailbox cannot say.
pub async fn seats(paths: &StatePaths, stalled: &[mcphost_pb::StalledCall]) -> Option<Vec<Value>> {
    let seats = clients::mailbox(paths)
        .ok()?
        .seat_diagnostics(mailbox_pb::SeatDiagnosticsRequest {})
        .await
        .ok()?
        .into_inner()
        .seats;
    Some(seats.iter().map(|s| seat_json(s, stalled)).collect())
}

/// Each connected account's state and last error; `healthy` is false when
/// any upstream is unavailable (a server that cannot start is not healthy).
pub async fn accounts(paths: &StatePaths) -> (bool, Value) {
    let listed = match clients::mcp_host(paths) {
        Ok(mut c) => c.list_accounts(mcphost_pb::ListAccountsRequest {}).await,
        Err(e) => return (false, json!({ "problem": e.to_string() })),
    };
    match listed {
        Ok(r) => {
            let accounts = r.into_inner().accounts;
            let healthy = accounts
                .iter()
                .all(|a| a.state != mcphost_pb::AccountState::Unavailable as i32);
            let list: Vec<Value> = accounts
                .iter()
                .map(|a| {
                    let v = super::accounts::account_json(a);
                    json!({ "name": v["name"], "state": v["state"], "lastError": v["lastError"] })
                })
                .collect();
            (healthy, json!(list))
        }
        Err(s) => (false, json!({ "problem": s.message() })),
    }
}

/// The census helper's queue depth and the time since the last good proof.
pub fn proofs(status: Option<&clankie_proto::admission::v1::LocalProofStats>) -> Value {
    match status {
        None => json!({ "known": false }),
        Some(s) => json!({
            "known": true,
            "helperQueueDepth": s.helper_queue_depth,
            "msSinceLastGoodProof": (s.last_proof_at_ms != 0)
                .then(|| (clankie_runtime::now_ms() - s.last_proof_at_ms).max(0)),
            "proofs": s.proofs,
            "reuses": s.reuses,
            "helperExchanges": s.helper_exchanges,
        }),
    }
}

/// The seats for a person: one line each.
pub fn print_seats(seats: &[Value]) {
    if seats.is_empty() {
        println!("seats: none live");
    }
    for s in seats {
        let text = |v: &Value| v.as_str().unwrap_or("").to_string();
        let missing: Vec<String> = s["workerTools"]["missing"]
            .as_array()
            .map(|m| m.iter().map(text).collect())
            .unwrap_or_default();
        println!(
            "seat pane {}  {}  eligibility {}  native tools {}  bridge {} ({}){}{}",
            field(&text(&s["paneId"])),
            field(s["hireId"].as_str().unwrap_or("no hire")),
            text(&s["eligibility"]["state"]),
            text(&s["nativeTools"]),
            if s["bridge"]["present"] == true {
                "present"
            } else {
                "absent"
            },
            text(&s["bridge"]["freshness"]),
            if missing.is_empty() {
                String::new()
            } else {
                format!("  missing {}", missing.join(","))
            },
            match s["workerTools"]["stalledCalls"].as_array().map(Vec::len) {
                Some(n) if n > 0 => format!("  {n} stalled calls"),
                _ => String::new(),
            }
        );
    }
}
