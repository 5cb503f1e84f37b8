//! What the gateway checks of a request before anything is forwarded: body
//! size, that the body is JSON, the JSON-RPC ids it names, and the header
//! fields a caller controls. Each failure is a clear refusal, never a hang.

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use clankie_runtime::limits::field;
use clankie_runtime::{ClankieError, ErrorCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::MAX_BODY;
use crate::refusal::refusal;

/// The longest request path (a route with its pane and id segments).
const MAX_PATH: usize = 2 * field::PATH_SEGMENT + 128;

/// The largest body a route takes: 4 MiB, or a review submission's patch
/// quota in base64.
pub(crate) fn body_limit(path: &str) -> usize {
    if path.ends_with("/review-candidates") {
        clankie_runtime::limits::MAX_CANDIDATE_BODY
    } else {
        MAX_BODY
    }
}

pub(crate) fn too_large(limit: usize) -> ClankieError {
    ErrorCode::PayloadTooLarge.err(format!(
        "the request body is larger than {} KiB",
        limit >> 10
    ))
}

/// The header fields and path a caller controls, bounded before admission.
pub(crate) fn check_head(req: &Request) -> Result<(), ClankieError> {
    if req.uri().path().len() > MAX_PATH {
        return Err(ErrorCode::InvalidArgument
            .err(format!("the request path is longer than {MAX_PATH} bytes")));
    }
    if let Some(id) = req.headers().get(crate::sessions::SESSION_HEADER)
        && id.len() > field::SESSION_ID
    {
        return Err(ErrorCode::InvalidArgument.err(format!(
            "mcp-session-id is at most {} bytes",
            field::SESSION_ID
        )));
    }
    Ok(())
}

/// A JSON-RPC error response (`id: null`) with an HTTP status.
pub(crate) fn jsonrpc_error(status: http::StatusCode, code: i64, message: String) -> Response {
    (
        status,
        axum::Json(json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": code, "message": message },
        })),
    )
        .into_response()
}

/// A refusal as a JSON-RPC error answering request `id` (HTTP status from
/// the reason), so the client can match it to its request.
pub(crate) fn jsonrpc_refusal(e: &ClankieError, id: Value) -> Response {
    tracing::info!(reason = e.code.as_str(), "gateway.request.refused");
    (
        e.code.http(),
        axum::Json(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": -32600, "message": e.message, "data": e.body() },
        })),
    )
        .into_response()
}

/// Keeps `held` until the response body is sent or abandoned: a streamed
/// answer ends only when its last event is written.
pub(crate) fn hold_until_sent(resp: Response, held: crate::sessions::InFlight) -> Response {
    use tokio_stream::StreamExt as _;
    let (parts, body) = resp.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _held = &held;
        chunk
    });
    Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

/// The fields of a JSON-RPC message the intake checks; every other field
/// is skipped without being kept.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    jsonrpc: Option<Value>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
}

/// The request id of a message as JSON text, bounded; a message that is
/// not JSON-RPC 2.0 as MCP speaks it (a version other than "2.0", a method
/// that is not a string, an id that is not a string or a number) is
/// refused here, so the MCP service never meets it.
fn id_text(e: &Envelope) -> Result<Option<String>, String> {
    if e.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err("\"jsonrpc\" must be \"2.0\"".into());
    }
    if e.method.as_ref().is_some_and(|m| !m.is_string()) {
        return Err("a method is a string".into());
    }
    let Some(id) = &e.id else { return Ok(None) };
    if !(id.is_string() || id.is_number()) {
        return Err("an id is a string or a number".into());
    }
    let text = id.to_string();
    if text.len() > field::JSONRPC_ID {
        return Err(format!(
            "a JSON-RPC id is at most {} bytes",
            field::JSONRPC_ID - 2
        ));
    }
    Ok(e.method.as_ref().map(|_| text))
}

/// The ids of the requests a body holds (one message or a batch).
pub(crate) fn request_ids(bytes: &[u8]) -> Result<Vec<String>, (i64, String)> {
    // serde skips the strings it does not keep without checking them.
    std::str::from_utf8(bytes)
        .map_err(|e| (-32700, format!("parse error: the body is not UTF-8 ({e})")))?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    let envelopes: Vec<Envelope> = match first {
        Some(b'[') => {
            // MCP (2025-06-18) has no batches.
            return match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Ok(_) => Err((
                    -32600,
                    "invalid request: JSON-RPC batches are not supported; send one message per request"
                        .into(),
                )),
                Err(e) => Err((-32700, format!("parse error: {e}"))),
            };
        }
        Some(b'{') => {
            vec![serde_json::from_slice(bytes).map_err(|e| (-32700, format!("parse error: {e}")))?]
        }
        _ => {
            // Valid JSON that is not a message, or not JSON at all.
            return match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Ok(_) => Err((
                    -32600,
                    "invalid request: a JSON-RPC message is an object".into(),
                )),
                Err(e) => Err((-32700, format!("parse error: {e}"))),
            };
        }
    };
    let mut ids = Vec::new();
    for e in &envelopes {
        if let Some(id) = id_text(e).map_err(|m| (-32600, format!("invalid request: {m}")))? {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Buffers a POST body (bounded) and answers a body that is not a JSON-RPC
/// message with a JSON-RPC error (HTTP 400), before the MCP service sees
/// it. Returns the request, the ids of the requests it carries, and
/// whether the mailbox proves its seat fresh by itself
/// (`observed`).
pub(crate) async fn checked_body(req: Request) -> Result<(Request, Vec<String>, bool), Response> {
    if req.method() != http::Method::POST {
        let by_mailbox = crate::observed::by_mailbox(req.method(), req.uri().path(), b"");
        return Ok((req, Vec::new(), by_mailbox));
    }
    let limit = body_limit(req.uri().path());
    let (parts, body) = req.into_parts();
    // A body that trickles in holds a connection and a buffer: it has the
    // request budget to arrive.
    let bytes = match tokio::time::timeout(crate::REQUEST_BUDGET, axum::body::to_bytes(body, limit))
        .await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return Err(refusal(&too_large(limit))),
        Err(_) => {
            return Err(refusal(&ErrorCode::MalformedRequest.err(format!(
                "the request body did not arrive within {} s",
                crate::REQUEST_BUDGET.as_secs()
            ))));
        }
    };
    let ids = if parts.uri.path().starts_with("/mcp") {
        request_ids(&bytes)
            .map_err(|(code, m)| jsonrpc_error(http::StatusCode::BAD_REQUEST, code, m))?
    } else {
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
            return Err(jsonrpc_error(
                http::StatusCode::BAD_REQUEST,
                -32700,
                format!("parse error: {e}"),
            ));
        }
        Vec::new()
    };
    let by_mailbox = crate::observed::by_mailbox(&parts.method, parts.uri.path(), &bytes);
    Ok((
        Request::from_parts(parts, axum::body::Body::from(bytes)),
        ids,
        by_mailbox,
    ))
}

/// Turns a plain-text client error from the MCP service into a JSON-RPC
/// error, so every malformed request gets one.
pub(crate) async fn jsonrpc_errors(resp: Response) -> Response {
    let is_json = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if !resp.status().is_client_error() || is_json {
        return resp;
    }
    let status = resp.status();
    let text = axum::body::to_bytes(resp.into_body(), 64 << 10)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    // The MCP service answers a JSON body it cannot read as 415; the media
    // type was right, the message was not.
    let status = if status == http::StatusCode::UNSUPPORTED_MEDIA_TYPE
        && text.starts_with("fail to deserialize request body")
    {
        http::StatusCode::BAD_REQUEST
    } else {
        status
    };
    jsonrpc_error(status, -32600, format!("invalid request: {text}"))
}

/// How long a refused request's body may take to arrive.
const REFUSED_BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A refusal decided from the request's head alone. The body (within its
/// route's limit) is read first, briefly: a client that writes its head and
/// its body apart would otherwise find the connection closed under its
/// body and never see why it was refused.
pub(crate) async fn refuse_unread(req: Request, e: &ClankieError) -> Response {
    let limit = body_limit(req.uri().path());
    let body = axum::body::to_bytes(req.into_body(), limit);
    let _ = tokio::time::timeout(REFUSED_BODY_WAIT, body).await;
    refusal(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_reads_requests_and_bounds_them() {
        assert_eq!(
            request_ids(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).expect("ok"),
            vec!["7".to_string()]
        );
        assert_eq!(
            request_ids(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).expect("ok"),
            Vec::<String>::new()
        );
        // A response names an id but is no request.
        assert!(
            request_ids(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#)
                .expect("ok")
                .is_empty()
        );
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","method":"ping"}}"#,
            "x".repeat(200)
        );
        assert_eq!(request_ids(long.as_bytes()).expect_err("long").0, -32600);
        assert_eq!(request_ids(b"{nope").expect_err("bad").0, -32700);
        assert_eq!(request_ids(b"42").expect_err("not a message").0, -32600);
        assert_eq!(request_ids(b"").expect_err("empty").0, -32700);
        let refused = |body: &[u8]| request_ids(body).expect_err("refused");
        assert_eq!(
            refused(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}").0,
            -32700
        );
        assert_eq!(
            refused(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).0,
            -32600
        );
        assert_eq!(refused(br#"[{"jsonrpc":"2.0","id":1,"#).0, -32700);
        assert_eq!(
            refused(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#).0,
            -32600
        );
        assert_eq!(
            refused(br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#).0,
            -32600
        );
        assert_eq!(
            refused(br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#).0,
            -32600
        );
        assert_eq!(refused(br#"{"id":1,"method":"ping"}"#).0, -32600);
        assert_eq!(refused(br#"{"jsonrpc":"2.0","id":1,"method":7}"#).0, -32600);
        // A null id names no request (an error reply that could not tell).
        assert!(
            request_ids(br#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}"#)
                .expect("an error reply")
                .is_empty()
        );
    }
}
