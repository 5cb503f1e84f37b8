//! One picture of the stack for the console, asked of the services as the
//! owner who signed in. Each part is asked on its own: a service that does
//! not answer blanks its part and names why in `problems`, and the rest
//! still shows.

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::auto::v1 as auto_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::clients::{Answer as _, Call, Health, INTERNAL};
use clankie_runtime::{ClankieError, Service};
use clankie_types::fleet::Outcome;
use clankie_types::hire::HireEnd;
use serde_json::{Value, json};

use super::session::OwnerClients;

/// One owner request with the internal budget.
fn ask<T>(message: T) -> tonic::Request<T> {
    Call::new(message).timeout(INTERNAL).request()
}

/// The most recent calls the console lists.
pub(crate) const RECENT_CALLS: usize = 20;

/// Builds the snapshot.
pub(crate) async fn snapshot(health: &Health, owner: &OwnerClients) -> Value {
    let (services, accounts, fleet, hires, calls, auto) = tokio::join!(
        services(health),
        accounts(owner.clone()),
        fleet(owner.clone()),
        hires(owner.clone()),
        calls(owner.clone()),
        auto(owner.clone()),
    );
    let mut problems = Vec::new();
    let mut part = |name: &str, r: Result<Value, ClankieError>| match r {
        Ok(v) => v,
        Err(e) => {
            problems.push(format!("{name}: {} ({})", e.message, e.code.as_str()));
            Value::Null
        }
    };
    let accounts = part("accounts", accounts);
    let fleet = part("fleet", fleet);
    let hires = part("hires", hires);
    let calls = part("calls", calls);
    let auto = part("auto", auto);
    json!({
        "atMs": clankie_runtime::now_ms(),
        "services": services,
        "accounts": accounts,
        "fleet": fleet,
        "hires": hires,
        "calls": calls,
        "auto": auto,
        "problems": problems,
    })
}

/// Every service's health, as `clankie status` reads it (the gateway is
/// the one answering).
async fn services(health: &Health) -> Value {
    let backends = Service::BACKENDS.map(|s| async move {
        let state = health.state(s).await;
        json!({ "name": s.name(), "state": state.as_str() })
    });
    let mut all = futures::future::join_all(backends).await;
    all.push(json!({ "name": Service::Gateway.name(), "state": "serving" }));
    Value::Array(all)
}

async fn accounts(mut owner: OwnerClients) -> Result<Value, ClankieError> {
    let req = ask(mcphost_pb::ListAccountsRequest {});
    let r = owner.mcp.list_accounts(req).await.answer()?;
    Ok(r.accounts
        .iter()
        .map(clankie_types::views::account)
        .collect())
}

async fn fleet(mut owner: OwnerClients) -> Result<Value, ClankieError> {
    let req = ask(admission_pb::FleetStatusRequest {});
    let r = owner.admission.fleet_status(req).await.answer()?;
    let s = r.settings.unwrap_or_default();
    Ok(json!({
        "tools": clankie_types::FleetTools::word_or_unknown(s.tools),
        "peerMessages": s.peer_messages,
        "workerSandbox": s.worker_sandbox,
        "unreadable": s.unreadable,
        "revision": s.revision,
        "problems": r.problems,
    }))
}

async fn hires(mut owner: OwnerClients) -> Result<Value, ClankieError> {
    let req = ask(mailbox_pb::RosterRequest {});
    let r = owner.mailbox.roster(req).await.answer()?;
    Ok(r.hires
        .iter()
        .filter(|h| HireEnd::open(h.ended))
        .map(clankie_types::views::hire)
        .collect())
}

async fn calls(mut owner: OwnerClients) -> Result<Value, ClankieError> {
    let req = ask(mcphost_pb::ReceiptStatsRequest {});
    let r = owner.mcp.receipt_stats(req).await.answer()?;
    let recent: Vec<Value> = r
        .recent
        .iter()
        .take(RECENT_CALLS)
        .map(|c| {
            json!({
                "receiptId": c.receipt_id,
                "name": c.name,
                "account": c.account,
                "outcome": if c.settled { Outcome::wire_word(c.outcome) } else { "running" },
                "detail": c.detail,
                "dispatchedAtMs": c.dispatched_at_ms,
                "settledAtMs": (c.settled_at_ms > 0).then_some(c.settled_at_ms),
            })
        })
        .collect();
    let uncertain: Vec<Value> = r
        .stalled
        .iter()
        .map(|c| {
            json!({
                "receiptId": c.receipt_id,
                "name": c.name,
                "settled": c.settled,
                "detail": c.detail,
                "dispatchedAtMs": c.dispatched_at_ms,
            })
        })
        .collect();
    Ok(json!({
        "recent": recent,
        "uncertain": uncertain,
        "records": r.records,
        "uncertainCount": r.uncertain,
        "pending": r.pending,
        "storeProblem": (!r.healthy).then_some(r.problem),
    }))
}

async fn auto(owner: OwnerClients) -> Result<Value, ClankieError> {
    let mut a = owner.auto.clone();
    let mut b = owner.auto;
    let status = a.status(ask(auto_pb::StatusRequest {}));
    let lines = b.project_status(ask(auto_pb::ProjectStatusRequest {}));
    let (status, lines) = tokio::join!(status, lines);
    let status = status.answer()?;
    let lines = lines.answer()?;
    let autonomy = status.autonomy.unwrap_or_default();
    Ok(json!({
        "on": autonomy.on,
        "readable": autonomy.readable,
        "nextRoundMs": (status.next_deadline_ms > 0).then_some(status.next_deadline_ms),
        "cadenceProblem": (!status.cadence_problem.is_empty()).then_some(status.cadence_problem),
        "projects": lines
            .projects
            .iter()
            .map(clankie_types::views::project_status_line)
            .collect::<Vec<_>>(),
    }))
}
