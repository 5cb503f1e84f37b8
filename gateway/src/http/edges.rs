//! What a stock MCP client meets at the edges of the gateway:
//! - a path that is not served answers 404 before any door, so a client
//!   looking for OAuth metadata (`/.well-known/oauth-protected-resource`,
//!   `/.well-known/oauth-authorization-server`) learns there is none and
//!   does not start an OAuth flow against a bearer-only gateway;
//! - ending a session (`DELETE /mcp`) answers 204 No Content: the session is
//!   gone when the answer is sent, and SDKs read 202 as a failed ending.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use clankie_runtime::ErrorCode;

use super::refusal;

/// Every path the routes do not serve.
pub(crate) async fn not_served(req: Request) -> Response {
    not_found(req.uri().path())
}

/// The answer for a path that is not served.
pub(crate) fn not_found(path: &str) -> Response {
    refusal(&ErrorCode::RouteNotFound.err(format!(
        "{path} is not served here: MCP is at /mcp (a bearer or a linked pane's process), the console at /console, health at /healthz and /readyz; this gateway takes bearer tokens, not OAuth"
    )))
}

/// `DELETE /mcp` answers 204 where the MCP service says 202.
pub(crate) async fn session_end(req: Request, next: Next) -> Response {
    let ending = req.method() == http::Method::DELETE && req.uri().path().starts_with("/mcp");
    let mut resp = next.run(req).await;
    if ending && resp.status() == http::StatusCode::ACCEPTED {
        *resp.status_mut() = http::StatusCode::NO_CONTENT;
    }
    resp
}
