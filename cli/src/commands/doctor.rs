//! `clankie doctor`: every service's health, the receipt store, each
//! account's state, each live seat's diagnostics, the census helper's queue,
//! the worker sandbox, the tracker budgets and the tracker ownership check,
//! with a verdict.

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
