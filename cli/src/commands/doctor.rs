//! `clankie doctor`: every service's health, the receipt store, the worker
//! sandbox and the tracker budgets, with a verdict.

use std::process::ExitCode;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::Service;
use clankie_runtime::paths::StatePaths;
use serde_json::json;

use crate::support::clients;
use crate::support::output::print_json;

use super::tracker::{budgets, budgets_json, print_budgets};

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
    let receipts = match clients::mcp_host(&paths)?
        .receipt_stats(mcphost_pb::ReceiptStatsRequest {})
        .await
    {
        Ok(r) => {
            let r = r.into_inner();
            healthy &= r.healthy;
            json!({ "healthy": r.healthy, "problem": r.problem, "records": r.records, "uncertain": r.uncertain })
        }
        Err(s) => {
            healthy = false;
            json!({ "healthy": false, "problem": s.message() })
        }
    };
    let budgets = budgets(&paths).await.ok();
    let sandbox = worker_sandbox(&paths).await;
    if json {
        print_json(&json!({
            "healthy": healthy,
            "services": services,
            "receipts": receipts,
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
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The worker sandbox: the owner's setting, and whether bubblewrap can
/// confine a hire on this machine right now.
async fn worker_sandbox(paths: &StatePaths) -> serde_json::Value {
    let setting = match clients::admission(paths) {
        Ok(mut c) => match c
            .fleet_status(clankie_proto::admission::v1::FleetStatusRequest {})
            .await
        {
            Ok(s) => match s.into_inner().settings {
                Some(s) if s.worker_sandbox => "on",
                Some(_) => "off",
                None => "unknown",
            },
            Err(_) => "unknown",
        },
        Err(_) => "unknown",
    };
    match clankie_runtime::sandbox::Sandbox::probe().await {
        Ok(_) => json!({ "setting": setting, "available": true }),
        Err(e) => json!({ "setting": setting, "available": false, "problem": e.message }),
    }
}
