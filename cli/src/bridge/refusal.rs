//! The gateway's refusal inside an rmcp transport error.
//!
//! rmcp hands a non-2xx answer on as text (`HTTP 403 Forbidden: {body}`),
//! and a 401's `WWW-Authenticate` challenge in its error's fields. Nothing
//! here matches a code's name anywhere in that text: the refusal is read
//! back as the gateway wrote it, either the `{"error": …}` body (the fleet
//! contract's `Refusal`) or the challenge's `error="…"` parameter, and the
//! code is parsed from that one field.

use clankie_runtime::ErrorCode;
use clankie_types::fleet::error::Refusal;

/// The refusal code an error's text carries, if the gateway wrote one.
pub(crate) fn code_in(text: &str) -> Option<ErrorCode> {
    // A Debug form escapes the body's quotes; read both forms.
    let unescaped = text.replace("\\\"", "\"");
    [text, unescaped.as_str()]
        .into_iter()
        .find_map(|t| body_code(t).or_else(|| challenge_code(t)))
}

/// The code of the first `{"error": …}` body in `text`.
fn body_code(text: &str) -> Option<ErrorCode> {
    text.match_indices('{').find_map(|(at, _)| {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Refusal>();
        match values.next() {
            Some(Ok(r)) => ErrorCode::parse(&r.error.code),
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
