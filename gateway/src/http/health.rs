//! `/healthz` (the gateway answers) and `/readyz` (every backend service
//! serving, with its state readable; `degraded`, naming them, while a
//! connected account is not verified).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use clankie_runtime::clients::ServiceState;
use clankie_runtime::grpc::Meta;
use serde_json::json;

use crate::Shared;

pub(crate) async fn healthz() -> impl IntoResponse {
    axum::Json(json!({ "status": "ok" }))
}

pub(crate) async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    let mut services = serde_json::Map::new();
    let mut ready = true;
    for service in clankie_runtime::Service::BACKENDS {
        // Readiness: serving, and its state readable.
        let state = shared.health.state(service).await;
        ready &= state == ServiceState::Serving;
        // The wire word for a service that does not answer is `not_serving`.
        let word = match state {
            ServiceState::Down => "not_serving",
            other => other.as_str(),
        };
        services.insert(service.name().into(), json!(word));
    }
    let status = if ready {
        http::StatusCode::OK
    } else {
        http::StatusCode::SERVICE_UNAVAILABLE
    };
    // Ready, and degraded while a connected account is not verified: its
    // tools are gone from the catalog. Names and states only.
    let degraded = clankie_runtime::clients::degraded_accounts(&shared.paths, Meta::default())
        .await
        .unwrap_or_default();
    let accounts: serde_json::Map<_, _> = degraded
        .iter()
        .map(|(name, state)| (name.clone(), json!(state)))
        .collect();
    let word = match (ready, degraded.is_empty()) {
        (false, _) => "not_ready",
        (true, true) => "ready",
        (true, false) => "degraded",
    };
    (
        status,
        axum::Json(json!({
            "ready": ready,
            "status": word,
            "services": services,
            "degradedAccounts": accounts,
        })),
    )
        .into_response()
}
