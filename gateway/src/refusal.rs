//! A refusal as HTTP says it, on every route and at every layer (the doors,
//! the intake, the faces): the status its code maps to in `code.rs`, and
//! the fleet contract's error body.

use axum::response::{IntoResponse, Response};
use clankie_runtime::{ClankieError, ErrorCode};
use serde_json::json;

/// How long a caller waits before sending again what the gateway refused
/// without forwarding it (admission unavailable, a connection turned
/// away): the body's `retryAfterMs` and the `Retry-After` header both say
/// it, from this one number.
pub const RETRY_AFTER_MS: u64 = 1000;

/// The JSON body of a refusal: `{"error": {"code", "message", "retryable"}}`,
/// with `retryAfterMs` and `Retry-After` when waiting helps and
/// `WWW-Authenticate` on a 401.
pub fn refusal(e: &ClankieError) -> Response {
    let mut body = e.body();
    if matches!(
        e.code,
        ErrorCode::FleetAdmissionUnavailable
            | ErrorCode::ServiceUnavailable
            | ErrorCode::TooManyConnections
    ) && body.get("retryAfterMs").is_none()
    {
        body["retryAfterMs"] = json!(RETRY_AFTER_MS);
    }
    let wait = body["retryAfterMs"].as_u64();
    let mut resp = (e.code.http(), axum::Json(json!({ "error": body }))).into_response();
    if let Some(ms) = wait
        && let Ok(v) = http::HeaderValue::from_str(&ms.div_ceil(1000).max(1).to_string())
    {
        resp.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    if e.code.http() == http::StatusCode::UNAUTHORIZED
        && let Ok(v) = http::HeaderValue::from_str(&format!("Bearer error=\"{}\"", e.code.as_str()))
    {
        resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
    }
    resp
}
