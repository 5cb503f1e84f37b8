//! What the gateway measures: every HTTP request's duration by method and
//! status (the semantic `http.server.request.duration`; no path, whose
//! seat and session ids would make a series per caller), and the MCP
//! sessions open.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, ObservableGauge};

use crate::Shared;

/// Bucket bounds (seconds), the semantic conventions' defaults.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

fn duration() -> &'static Histogram<f64> {
    static H: OnceLock<Histogram<f64>> = OnceLock::new();
    H.get_or_init(|| {
        clankie_runtime::telemetry::metrics::meter()
            .f64_histogram("http.server.request.duration")
            .with_description("Duration of HTTP server requests.")
            .with_unit("s")
            .with_boundaries(BUCKETS.to_vec())
            .build()
    })
}

/// Times one request, whatever answers it (a door's refusal included).
pub(crate) async fn record(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_owned();
    let resp = next.run(req).await;
    duration().record(
        started.elapsed().as_secs_f64(),
        &[
            KeyValue::new("http.request.method", method),
            KeyValue::new(
                "http.response.status_code",
                i64::from(resp.status().as_u16()),
            ),
        ],
    );
    resp
}

/// Starts reading the open session count at each collection (one gateway
/// per process; the reading holds no strong reference to it).
pub(crate) fn watch_sessions(shared: &Arc<Shared>) {
    static G: OnceLock<ObservableGauge<u64>> = OnceLock::new();
    let weak: Weak<Shared> = Arc::downgrade(shared);
    G.get_or_init(move || {
        clankie_runtime::telemetry::metrics::meter()
            .u64_observable_gauge("clankie.gateway.sessions")
            .with_description("MCP sessions open on the gateway's listeners.")
            .with_unit("{session}")
            .with_callback(move |o| {
                if let Some(shared) = weak.upgrade() {
                    let open: usize = shared.listeners.lock().iter().map(|s| s.open()).sum();
                    o.observe(open as u64, &[]);
                }
            })
            .build()
    });
}
