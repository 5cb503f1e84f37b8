//! What a stock MCP client meets at the edges of the gateway:
//! - a path that is not served answers 404 before any door, so a client
//!   looking for OAuth metadata (`/.well-known/oauth-protected-resource`,
//!   `/.well-known/oauth-authorization-server`) learns there is none and
//!   does not start an OAuth flow against a bearer-only gateway;
//! - ending a session (`DELETE /mcp`) answers 204 No Content: the session is
//!   gone when the answer is sent, and SDKs read 202 as a failed ending;
//! - a stream resumed with `Last-Event-ID` starts after that event, as
//!   server-sent events define it (rmcp's session cache replays from the
//!   event named, so the caller would hear its last event twice).

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

/// `GET /mcp` with `Last-Event-ID: INDEX[/REQUEST]` (rmcp's event ids)
/// resumes after that event: the index is moved on by one. An id of
/// another shape passes unchanged (rmcp refuses it).
pub(crate) async fn resume_after(mut req: Request, next: Next) -> Response {
    if req.method() == http::Method::GET && req.uri().path().starts_with("/mcp") {
        let next_id = req
            .headers()
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(following_event);
        if let Some(id) = next_id.and_then(|id| http::HeaderValue::from_str(&id).ok()) {
            req.headers_mut().insert("last-event-id", id);
        }
    }
    next.run(req).await
}

/// The id of the event after `id` on the same stream.
fn following_event(id: &str) -> Option<String> {
    let (index, stream) = match id.split_once('/') {
        Some((index, stream)) => (index, Some(stream)),
        None => (id, None),
    };
    let index = index.parse::<usize>().ok()?.checked_add(1)?;
    Some(match stream {
        Some(stream) if stream.parse::<u64>().is_ok() => format!("{index}/{stream}"),
        Some(_) => return None,
        None => index.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_starts_after_the_event_named() {
        assert_eq!(following_event("1/0").as_deref(), Some("2/0"));
        assert_eq!(following_event("7").as_deref(), Some("8"));
        assert_eq!(following_event("x/0"), None);
        assert_eq!(following_event("1/x"), None);
        assert_eq!(following_event(""), None);
        assert_eq!(following_event(&usize::MAX.to_string()), None);
    }
}
