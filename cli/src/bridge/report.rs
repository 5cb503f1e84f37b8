//! `message_clankie` with a receipt id the model gives: the lookup of that
//! report, never a send. The bridge chooses a send's id itself, so a given
//! id is a repeat, and a repeat never sends again: the mailbox answers
//! where the original stands (sealing an id it never saw, so a delayed
//! original cannot land after this answer). Over the gateway's local
//! socket, as the seat.

use clankie_runtime::ErrorCode;
use clankie_types::fleet::ReceiptId;
use clankie_types::fleet::seat::SeatRoute;
use serde_json::{Value, json};

use super::gateway::Http;

/// Looks the report up: its state (`accepted`, `not_delivered`,
/// `unresolved`), or the refusal. A lookup never sends, so a refusal that
/// says waiting helps (a mailbox restarting) is asked again after the wait
/// it names, within the request's budget.
pub async fn look_up(socket: &str, pane: &str, receipt_id: &str) -> Result<Value, Value> {
    let deadline = tokio::time::Instant::now() + super::gateway::REQUEST_BUDGET;
    loop {
        let answer = look_up_once(socket, pane, receipt_id).await;
        let wait = answer
            .as_ref()
            .err()
            .filter(|v| v["error"]["retryable"] == true)
            .and_then(|v| v["error"]["retryAfterMs"].as_u64())
            .map(std::time::Duration::from_millis);
        match wait {
            Some(wait) if tokio::time::Instant::now() + wait < deadline => {
                tokio::time::sleep(wait).await;
            }
            _ => return answer,
        }
    }
}

async fn look_up_once(socket: &str, pane: &str, receipt_id: &str) -> Result<Value, Value> {
    let refused =
        |code: &str, message: String| json!({ "error": { "code": code, "message": message } });
    let id = ReceiptId::parse(receipt_id)
        .map_err(|e| refused(ErrorCode::ArgumentsInvalid.as_str(), e.to_string()))?;
    let path = SeatRoute::Report
        .path(&pane.replace('%', "%25"))
        .replace("{id}", id.as_str());
    let mut http = Http::new(socket.to_string());
    match http.call("GET", &path, None).await {
        Ok((200, v)) => Ok(v),
        Ok((_, v)) if v.get("error").is_some() => Err(v),
        Ok((status, v)) => Err(refused(
            ErrorCode::ServiceUnavailable.as_str(),
            format!("HTTP {status}: {v}"),
        )),
        Err(e) => Err(refused(
            ErrorCode::FleetAdmissionUnavailable.as_str(),
            format!("the gateway is unreachable ({e}); nothing was sent"),
        )),
    }
}
