//! `clankie status`: each service's health and where the gateway listens.

use crate::support::exit::Exit;
use std::collections::HashMap;
use std::process::ExitCode;

use clankie_runtime::paths::StatePaths;
use clankie_runtime::{Service, grpc};

use crate::support::{clients, discovery};

/// A service as `status` and `doctor` show it: `serving` (live and ready),
/// `not_ready` (live, but its state is unreadable or still loading; see its
/// log) or `down`.
pub async fn service_state(paths: &StatePaths, service: Service, meta: grpc::Meta) -> &'static str {
    clankie_runtime::clients::service_state(paths, service, meta)
        .await
        .as_str()
}

pub async fn status(paths: StatePaths, json: bool) -> anyhow::Result<ExitCode> {
    let mut health = HashMap::new();
    let mut all = true;
    for service in Service::START_ORDER {
        let meta = clients::owner_meta(&paths).unwrap_or_default();
        let state = service_state(&paths, service, meta).await;
        all &= state == "serving";
        health.insert(service.name(), state);
    }
    let gateway = discovery::read(&paths).ok().map(|d| d.url);
    let degraded = if all {
        clankie_runtime::clients::degraded_accounts(
            &paths,
            clients::owner_meta(&paths).unwrap_or_default(),
        )
        .await
        .unwrap_or_default()
    } else {
        Vec::new()
    };
    if json {
        let services: serde_json::Map<_, _> = Service::START_ORDER
            .iter()
            .map(|s| (s.name().to_string(), serde_json::json!(health[s.name()])))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "state": paths.root(),
                "gateway": gateway,
                "services": services,
                "degradedAccounts": degraded
                    .iter()
                    .map(|(name, state)| (name.clone(), serde_json::json!(state)))
                    .collect::<serde_json::Map<_, _>>(),
                "healthy": all && degraded.is_empty(),
            })
        );
    } else {
        println!("state:   {}", paths.root().display());
        println!("gateway: {}", gateway.as_deref().unwrap_or("(not running)"));
        for s in Service::START_ORDER {
            println!("  {:<10} {}", s.name(), health[s.name()].replace('_', " "));
        }
        print_degraded(&paths, &degraded);
    }
    Ok(if !all {
        Exit::Down.code()
    } else if !degraded.is_empty() {
        Exit::Failed.code()
    } else {
        Exit::Ok.code()
    })
}

/// One line per account that is not verified, with where its server's
/// stderr is logged.
pub fn print_degraded(paths: &StatePaths, degraded: &[(String, &str)]) {
    for (name, state) in degraded {
        println!(
            "degraded: account {name} is {state}; `clankie accounts` shows why, its server's stderr is in {}",
            paths.account_log(name).display()
        );
    }
}
