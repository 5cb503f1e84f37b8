//! The gateway's refusal inside an rmcp transport error.
//!
//! rmcp hands a non-2xx answer on as text (`HTTP 403 Forbidden: {body}`),
//! and a 401's `WWW-Authenticate` challenge in its error's fields. Nothing
//! here matches a code's name anywhere in that text: the refusal is read
//! back as the gateway wrote it, either the `{"error": …}` body (the fleet
//! contract's `Refusal`) or the challenge's `error="…"` parameter, and the
//! code is parsed from that one field.

use std::time::Duration;

use clankie_runtime::ErrorCode;
use clankie_types::fleet::error::{ErrorBody, Refusal};

/// The refusal code an error's text carries, if the gateway wrote one.
pub(crate) fn code_in(text: &str) -> Option<ErrorCode> {
    unescaped(text).find_map(|t| {
        body_in(&t)
            .and_then(|b| ErrorCode::parse(&b.code))
            .or_else(|| challenge_code(&t))
    })
}

/// How long the gateway asked for before the same request is sent again:
/// present only on a refusal that says nothing was forwarded (`retryable`),
/// from its `retryAfterMs`, else the gateway's one second.
pub(crate) fn retry_after(text: &str) -> Option<Duration> {
    unescaped(text).find_map(|t| {
        let body = body_in(&t).filter(|b| b.retryable)?;
        ErrorCode::parse(&body.code)?;
        let ms = body.details.get("retryAfterMs").and_then(|v| v.as_u64());
        Some(Duration::from_millis(ms.unwrap_or(1000)))
    })
}

/// The refusal a bare HTTP status stands for. rmcp's reqwest transport
/// keeps only a 429 or 5xx answer's status and `Retry-After`, never its
/// body. The gateway sends `Retry-After` with a 503 only when nothing was
/// forwarded (admission unavailable, a connection turned away), and a 429
/// only from its doors (a member past its share of connections or
/// sessions), so each is written back as the refusal body it stood for and
/// read like any other. Any other bare status stays what it was: unknown.
pub(crate) fn status_refusal(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    http_status(e).and_then(|s| bare_status_refusal(s.status, s.retry_after.as_deref()))
}

/// The HTTP status the gateway answered with, anywhere in an error's chain.
fn http_status<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e rmcp::transport::streamable_http_client::HttpStatusError> {
    use rmcp::transport::streamable_http_client::{HttpStatusError, StreamableHttpError};
    let mut at = Some(e);
    while let Some(err) = at {
        let status = err.downcast_ref::<HttpStatusError>().or_else(|| {
            match err.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::HttpStatus(s)) => Some(s),
                _ => None,
            }
        });
        if status.is_some() {
            return status;
        }
        at = err.source();
    }
    None
}

/// Whether the gateway answered the request with an HTTP status: the
/// connection was alive, and the failure is this request's.
pub(crate) fn answered_with_status(e: &(dyn std::error::Error + 'static)) -> bool {
    http_status(e).is_some()
}

/// The refusal body a bare status and `Retry-After` stand for, as text.
fn bare_status_refusal(status: u16, retry_after: Option<&str>) -> Option<String> {
    let wait = retry_after.and_then(|v| v.trim().parse::<u64>().ok());
    let refusal = match (status, wait) {
        (503, Some(_)) => ErrorCode::ServiceUnavailable
            .err("the gateway answered 503 with Retry-After: nothing was forwarded"),
        (429, _) => ErrorCode::TooManyConnections.err(
            "the gateway answered 429: this member holds its share of connections or sessions; nothing was forwarded",
        ),
        _ => return None,
    };
    let mut body = refusal.body();
    if let Some(secs) = wait {
        body["retryAfterMs"] = serde_json::json!(secs.saturating_mul(1000));
    }
    Some(format!(
        "HTTP {status}: {}",
        serde_json::json!({ "error": body })
    ))
}

/// Whether an error is a connection that was never made (refused, or the
/// socket is gone): then not a byte of the request left, and the answer is
/// a refusal, never "may have applied".
pub(crate) fn never_sent(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(err) = at {
        if err
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_connect)
        {
            return true;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
            )
        {
            return true;
        }
        at = err.source();
    }
    false
}

/// The text as written, then with a Debug form's escaped quotes undone.
fn unescaped(text: &str) -> impl Iterator<Item = String> {
    [text.to_string(), text.replace("\\\"", "\"")].into_iter()
}

/// The first `{"error": …}` body in `text`.
fn body_in(text: &str) -> Option<ErrorBody> {
    text.match_indices('{').find_map(|(at, _)| {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Refusal>();
        match values.next() {
            Some(Ok(r)) => Some(r.error),
            _ => None,
        }
    })
}

/// The code in a `Bearer error="…"` challenge in `text`.
fn challenge_code(text: &str) -> Option<ErrorCode> {
    text.match_indices("Bearer error=\"").find_map(|(at, m)| {
        let rest = &text[at + m.len()..];
        ErrorCode::parse(&rest[..rest.find('"')?])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_body_in_the_transport_text_is_read_by_its_code_field() {
        let text = r#"Transport send error: HTTP 403 Forbidden: {"error":{"code":"local_process_membership_required","message":"no linked pane holds this process","retryable":false}}"#;
        assert_eq!(
            code_in(text),
            Some(ErrorCode::LocalProcessMembershipRequired)
        );
    }

    #[test]
    fn only_a_refusal_that_forwarded_nothing_asks_for_a_retry_after_its_wait() {
        let waited = r#"HTTP 503: {"error":{"code":"fleet_admission_unavailable","message":"m","retryable":true,"retryAfterMs":1000}}"#;
        assert_eq!(retry_after(waited), Some(Duration::from_secs(1)));
        let plain =
            r#"HTTP 503: {"error":{"code":"service_unavailable","message":"m","retryable":true}}"#;
        assert_eq!(retry_after(plain), Some(Duration::from_secs(1)));
        let debug = format!("{waited:?}");
        assert_eq!(retry_after(&debug), Some(Duration::from_secs(1)));
        let final_ = r#"HTTP 403: {"error":{"code":"local_process_membership_required","message":"m","retryable":false}}"#;
        assert_eq!(retry_after(final_), None);
        let unknown = r#"HTTP 503: {"error":{"code":"not_a_code","message":"m","retryable":true}}"#;
        assert_eq!(retry_after(unknown), None);
    }

    #[test]
    fn a_bare_429_is_a_refusal_that_waits_as_long_as_it_was_told() {
        let waited = bare_status_refusal(429, Some("3")).expect("refusal");
        assert_eq!(code_in(&waited), Some(ErrorCode::TooManyConnections));
        assert_eq!(retry_after(&waited), Some(Duration::from_secs(3)));
        // Without Retry-After: the gateway's one second.
        let bare = bare_status_refusal(429, None).expect("refusal");
        assert_eq!(code_in(&bare), Some(ErrorCode::TooManyConnections));
        assert_eq!(retry_after(&bare), Some(Duration::from_secs(1)));
        // A 503 without Retry-After may have come from past the door.
        assert_eq!(bare_status_refusal(503, None), None);
        assert_eq!(bare_status_refusal(500, Some("1")), None);
    }

    #[test]
    fn only_a_connection_never_made_is_never_sent() {
        #[derive(Debug)]
        struct Wrapped(std::io::Error);
        impl std::fmt::Display for Wrapped {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("send failed")
            }
        }
        impl std::error::Error for Wrapped {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let refused = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(never_sent(&refused));
        let gone = Wrapped(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(never_sent(&gone));
        // A connection that broke under a request may have carried it.
        let reset = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(!never_sent(&reset));
    }

    #[test]
    fn a_challenge_is_read_plain_and_as_debug_escapes_it() {
        let plain = r#"authorization required: Bearer error="grant_revoked""#;
        assert_eq!(code_in(plain), Some(ErrorCode::GrantRevoked));
        let debug = format!("{:?}", plain);
        assert_eq!(code_in(&debug), Some(ErrorCode::GrantRevoked));
    }

    #[test]
    fn a_code_named_in_prose_or_in_another_field_is_not_a_refusal() {
        // Text that merely mentions a code (a tool's own output, a message
        // quoting one) is not the gateway refusing.
        assert_eq!(
            code_in("upstream said: fleet_admission_unavailable, try later"),
            None
        );
        assert_eq!(
            code_in(r#"HTTP 502: {"error":{"code":"not_a_code","message":"grant_revoked"}}"#),
            None
        );
        assert_eq!(code_in(r#"{"message":"grant_revoked"}"#), None);
    }
}
