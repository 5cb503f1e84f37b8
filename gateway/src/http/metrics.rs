//! `GET /metrics`: every process's metrics on one Prometheus page, for the
//! owner credential only (series name accounts and tools). The gateway's
//! own series, and each backend's page asked over its socket with the
//! credential the caller presented (each backend checks it again). A
//! backend that does not answer reads as `clankie_service_up 0`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use clankie_runtime::telemetry::metrics;
use clankie_runtime::{ErrorCode, Service};

use super::refusal;
use crate::Shared;

/// The content type of Prometheus' text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) async fn metrics(
    State(shared): State<Arc<Shared>>,
    headers: http::HeaderMap,
) -> Response {
    let Some(bearer) = super::owner::presented(&headers) else {
        return refusal(
            &ErrorCode::OwnerCredentialRequired.err("/metrics needs the owner credential"),
        );
    };
    if !super::owner::matches(shared.owner.as_ref(), &headers) {
        return refusal(
            &ErrorCode::OwnerCredentialInvalid.err("the owner credential does not match"),
        );
    }
    let scrapes = Service::BACKENDS.map(|service| {
        let paths = shared.paths.clone();
        let bearer = bearer.to_owned();
        async move {
            let page = clankie_runtime::clients::scrape(&paths, service, &bearer).await;
            (service, page.ok())
        }
    });
    let answered = futures::future::join_all(scrapes).await;
    let mut up = String::from(
        "# HELP clankie_service_up Whether the service answered this scrape.\n# TYPE clankie_service_up gauge\n",
    );
    up.push_str("clankie_service_up{service_name=\"clankie-gateway\"} 1\n");
    let mut pages = vec![metrics::exposition()];
    for (service, page) in answered {
        up.push_str(&format!(
            "clankie_service_up{{service_name=\"clankie-{}\"}} {}\n",
            service.name(),
            u8::from(page.is_some())
        ));
        pages.extend(page);
    }
    pages.push(up);
    let body = metrics::merge_expositions(pages.iter().map(String::as_str));
    ([(http::header::CONTENT_TYPE, TEXT_FORMAT)], body).into_response()
}
