//! `clankie doctor`: every service's health, the receipt store, each
//! account's state, each live seat's diagnostics, the census helper's queue,
//! the worker sandbox, the tracker budgets and the tracker ownership check,
//! the remote machines' links (on a main stack) and this machine's own link
//! (on an enrolled one), with a verdict.

use std::process::ExitCode;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::Service;
use clankie_runtime::paths::StatePaths;
use serde_json::json;

use crate::support::clients;
use crate::support::output::print_json;

use super::tracker::{budgets, budgets_json, print_budgets};
use super::{diagnostics, ownership};

/// `clankie doctor`: every service's health, the receipt store, and the
/// tracker budgets. Exits non-zero when anything is unhealthy.
pub async fn doctor(paths: StatePaths, json: bool) -> anyhow::Result<ExitCode> {
    let mut services = serde_json::Map::new();
    let mut healthy = true;
    for service in Service::START_ORDER {
        let meta = clients::owner_meta(&paths).unwrap_or_default();
        let state = super::status::service_state(&paths, service, meta).await;
        healthy &= state == "serving";
        services.insert(service.name().into(), json!(state));
    }
    let mut stalled = Vec::new();
    let receipts = match clients::mcp_host(&paths)?
        .receipt_stats(mcphost_pb::ReceiptStatsRequest {})
        .await
    {
        Ok(r) => {
            let r = r.into_inner();
            healthy &= r.healthy;
            stalled = r.stalled;
            json!({ "healthy": r.healthy, "problem": r.problem, "records": r.records, "uncertain": r.uncertain })
        }
        Err(s) => {
            healthy = false;
            json!({ "healthy": false, "problem": s.message() })
        }
    };
    let budgets = budgets(&paths).await.ok();
    let fleet = fleet_status(&paths).await;
    let sandbox = worker_sandbox(fleet.as_ref()).await;
    let (accounts_healthy, accounts) = diagnostics::accounts(&paths).await;
    healthy &= accounts_healthy;
    let seats = diagnostics::seats(&paths, &stalled).await;
    let proofs = diagnostics::proofs(fleet.as_ref().and_then(|f| f.local_proofs.as_ref()));
    let ownership = ownership::ownership(&paths).await;
    let machines = fleet.as_ref().map(|f| machines(&f.machines));
    healthy &= machines.iter().flatten().all(|m| m["healthy"] != false);
    let uplink = uplink(&paths);
    healthy &= uplink.as_ref().is_none_or(|u| u["healthy"] == true);
    if json {
        print_json(&json!({
            "healthy": healthy,
            "services": services,
            "receipts": receipts,
            "accounts": accounts,
            "seats": seats,
            "localProofs": proofs,
            "trackerOwnership": ownership,
            "trackerBudgets": budgets.as_ref().map(budgets_json),
            "workerSandbox": sandbox,
            "machines": machines,
            "uplink": uplink,
        }));
    } else {
        for (name, state) in &services {
            println!("{name:<10} {}", state.as_str().unwrap_or(""));
        }
        println!("receipts   {receipts}");
        println!(
            "worker sandbox: {} ({})",
            sandbox["setting"].as_str().unwrap_or("unknown"),
            match sandbox["available"].as_bool() {
                Some(true) => "bubblewrap works here".to_string(),
                _ => format!(
                    "unavailable: {}",
                    sandbox["problem"].as_str().unwrap_or("unknown")
                ),
            }
        );
        match &budgets {
            Some(b) => print_budgets(b, false),
            None => println!("tracker budgets: unavailable (is the mcp-host running?)"),
        }
        println!("accounts   {accounts}");
        println!("proofs     {proofs}");
        match &ownership {
            Some(o) => println!("tracker ownership: {}", ownership::summary(o)),
            None => {
                println!("tracker ownership: unavailable (are the tracker and mailbox running?)")
            }
        }
        match &seats {
            Some(seats) => diagnostics::print_seats(seats),
            None => println!("seats: unavailable (is the mailbox running?)"),
        }
        for m in machines.iter().flatten() {
            println!(
                "machine {}: {}",
                m["name"].as_str().unwrap_or(""),
                m["explain"].as_str().unwrap_or("")
            );
        }
        if let Some(u) = &uplink {
            println!(
                "link to the main stack: {}",
                u["explain"].as_str().unwrap_or("")
            );
        }
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The fleet's status from admission, if it answers.
async fn fleet_status(paths: &StatePaths) -> Option<admission_pb::FleetStatusResponse> {
    clients::admission(paths)
        .ok()?
        .fleet_status(admission_pb::FleetStatusRequest {})
        .await
        .ok()
        .map(tonic::Response::into_inner)
}

/// The worker sandbox: the owner's setting, and whether bubblewrap can
/// confine a hire on this machine right now.
async fn worker_sandbox(fleet: Option<&admission_pb::FleetStatusResponse>) -> serde_json::Value {
    let setting = match fleet.and_then(|f| f.settings.as_ref()) {
        Some(s) if s.worker_sandbox => "on",
        Some(_) => "off",
        None => "unknown",
    };
    match clankie_runtime::sandbox::Sandbox::probe().await {
        Ok(_) => json!({ "setting": setting, "available": true }),
        Err(e) => json!({ "setting": setting, "available": false, "problem": e.message }),
    }
}

/// Each remote machine of this (main) stack, and what its link says. An
/// enrolled machine whose link is down is unhealthy: the owner expects it.
fn machines(list: &[admission_pb::Machine]) -> Vec<serde_json::Value> {
    let now = clankie_runtime::now_ms();
    list.iter()
        .map(|m| {
            let (healthy, explain) = if m.link_up {
                (true, super::machine::machine_line(m, now))
            } else if m.enrolled {
                (
                    false,
                    format!(
                        "enrolled, but its link is down{}: on {name}, `clankie doctor` says why \
                         (its stack stopped, the network between, or a key that no longer \
                         matches: then remove it here and enrol it again)",
                        if m.link_since_ms == 0 {
                            " (not linked since admission started)".to_string()
                        } else {
                            format!(" for {}", super::fleet::left(now, m.link_since_ms))
                        },
                        name = m.name
                    ),
                )
            } else {
                (true, super::machine::machine_line(m, now))
            };
            json!({ "name": m.name, "healthy": healthy, "linkUp": m.link_up, "explain": explain })
        })
        .collect()
}

/// This machine's own link to its main stack, when it is enrolled with
/// one: what its gateway last wrote, explained.
fn uplink(paths: &StatePaths) -> Option<serde_json::Value> {
    if !paths.relay_link().exists() {
        return None;
    }
    let status: Option<clankie_types::discovery::UplinkStatus> =
        std::fs::read(paths.uplink_status())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(s) = status else {
        return Some(json!({
            "healthy": false,
            "state": "unknown",
            "explain": "enrolled, but the gateway has not reported its link (is the stack up?)",
        }));
    };
    let now = clankie_runtime::now_ms();
    let since = super::fleet::left(now, s.since_ms);
    let why = match s.reason.as_str() {
        "machine_not_found" => "the main stack does not know this machine's key (it was removed there, or never enrolled with this key): ask the owner for a new secret and enrol again".to_string(),
        "relay_certificate_mismatch" => "the main stack shows another certificate than the one pinned at enrolment (its key changed, or this is not the main stack): nothing is sent; enrol again with the new pin".to_string(),
        "machine_enrolment_refused" => "the enrolment was refused: ask the owner for a new secret".to_string(),
        "service_unavailable" | "timed out" => format!("the main stack at {} does not answer (is it up, with a relay listener, and is the network between up?); retrying", s.main),
        "silent" => "the link went silent (the network between, or a stalled main stack); retrying".to_string(),
        other => format!("{other}; retrying"),
    };
    let (healthy, explain) = match s.state.as_str() {
        "up" => (true, format!("up for {since} to {}", s.main)),
        "unreadable" => (false, format!("{}: not linking", s.reason)),
        state => (false, format!("{state} for {since}: {why}")),
    };
    Some(json!({
        "healthy": healthy,
        "state": s.state,
        "reason": s.reason,
        "sinceMs": s.since_ms,
        "explain": explain,
    }))
}
