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

use super::gateway::{encode, seat_answer};

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
    let id = ReceiptId::parse(receipt_id).map_err(|e| {
        json!({ "error": { "code": ErrorCode::ArgumentsInvalid.as_str(), "message": e.to_string() } })
    })?;
    let path = SeatRoute::Report
        .path(&encode(pane))
        .replace("{id}", id.as_str());
    seat_answer(socket, "GET", &path, None, "nothing was sent").await
}
