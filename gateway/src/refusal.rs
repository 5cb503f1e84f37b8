//! A refusal as HTTP says it, on every route and at every layer (the doors,
//! the intake, the faces): the status its code maps to in `code.rs`, and
//! the fleet contract's error body.

use axum::response::{IntoResponse, Response};
use clankie_runtime::{ClankieError, ErrorCode};
use serde_json::json;

/// The JSON body of a refusal: `{"error": {"code", "message", "retryable"}}`,
/// with `Retry-After` when waiting helps and `WWW-Authenticate` on a 401.
pub fn refusal(e: &ClankieError) -> Response {
    let mut resp = (e.code.http(), axum::Json(json!({ "error": e.body() }))).into_response();
    if e.code == ErrorCode::RequestBudget
        && let Some(ms) = e.details_json().and_then(|d| d["retryAfterMs"].as_u64())
        && let Ok(v) = http::HeaderValue::from_str(&ms.div_ceil(1000).max(1).to_string())
    {
        resp.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    if e.code == ErrorCode::FleetAdmissionUnavailable {
        resp.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    if e.code.http() == http::StatusCode::UNAUTHORIZED
        && let Ok(v) = http::HeaderValue::from_str(&format!("Bearer error=\"{}\"", e.code.as_str()))
    {
        resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
    }
    resp
}
