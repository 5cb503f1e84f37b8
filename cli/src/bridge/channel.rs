//! The bridge's seat channel: the seat's mailbox long poll over the
//! gateway's local Unix socket, one kept-alive connection (so the seat is
//! proven once per connection).
//!
//! - Each poll waits up to 25 s and carries the catalog revision; a changed
//!   revision makes the bridge list its tools again. The first poll does
//!   not wait: without a revision the gateway cannot end a poll on a
//!   change, so a seat would hear of one only when its first 25 s were up.
//!   The revision it learns is a change too (the bridge listed before it
//!   knew one), so it lists once more. A poll ended by a change carries the
//!   new listing, which the bridge takes instead of listing again.
//! - Listed deliveries are claimed first (exclusively: a claim survives
//!   timeouts and lost responses). Each claimed one goes to the harness as an
//!   MCP notification, `notifications/claude/channel` with `{content, meta}`
//!   (Claude Code's channel notification), or, under Codex, as a turn on
//!   its thread through Codex's app-server (`codex.rs`), and is
//!   acknowledged under its
//!   claim only after that handoff: the ack is the native delivery receipt.
//!   A delivery definitely not handed off (no harness session yet) is
//!   released for a later poll; one whose handoff or ack is uncertain stays
//!   claimed and is never handed off twice.
//! - A failing poll (or a service without the route) is retried every 5 s.
//!   A definite non-member refusal makes the channel quiet until the
//!   harness itself is admitted again; a process that is not its pane's
//!   foreground agent (not a native seat) stops polling for 5 minutes.

use clankie_types::fleet::ErrorBody;
use clankie_types::fleet::seat::{Claim, Claimed, Delivery, DeliveryRef, PollAnswer, SeatRoute};
use std::sync::Arc;
use std::time::Duration;

use clankie_runtime::ErrorCode;
use rmcp::model::{CustomNotification, ServerNotification};
use serde_json::json;

use super::codex::CodexThreads;
use super::gateway::{Gateway, Http, encode};

/// The MCP notification method deliveries use.
pub const CHANNEL_METHOD: &str = "notifications/claude/channel";

const POLL_WAIT_MS: u64 = 25_000;

const RETRY: Duration = Duration::from_secs(5);

const NOT_A_SEAT_PAUSE: Duration = Duration::from_secs(300);

/// Runs the seat channel until the process exits.
pub async fn run(up: Arc<Gateway>, socket: String, pane: String) {
    let codex = CodexThreads::from_env();
    let mut http = Http::new(socket);
    let pane = encode(&pane);
    let route = |r: SeatRoute| r.path(&pane);
    let mut revision = String::new();
    loop {
        if up.is_quiet() {
            tokio::time::sleep(RETRY).await;
            continue;
        }
        // The tools it offers, so the hire's readiness can be judged.
        let tools = up
            .tools
            .read()
            .await
            .as_ref()
            .map(|t| {
                t.iter()
                    .map(|t| t.name.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let wait = if revision.is_empty() { 0 } else { POLL_WAIT_MS };
        tracing::debug!(wait, "seat poll");
        let path = format!(
            "{}?wait={wait}&revision={}&tools={}",
            route(SeatRoute::Mailbox),
            encode(&revision),
            encode(&tools)
        );
        let (status, body) = match http.call("GET", &path, None).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "seat poll failed");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        if status != 200 {
            let code = ErrorBody::read(&body).map(|e| e.code).unwrap_or_default();
            up.note_outcome::<()>(&Err(code.clone()));
            if code == ErrorCode::NativeSeatRequired.as_str() {
                tracing::info!(
                    "this bridge is not its pane's native seat; the seat channel pauses"
                );
                tokio::time::sleep(NOT_A_SEAT_PAUSE).await;
            } else {
                tokio::time::sleep(RETRY).await;
            }
            continue;
        }
        let polled: PollAnswer = match serde_json::from_value(body) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "seat poll answer unreadable");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        if polled.catalog_revision != revision {
            match polled.listing {
                Some(listing) => up.carry(listing),
                None => up.relist.notify_one(),
            }
        }
        revision = polled.catalog_revision;
        if polled.deliveries.is_empty() {
            continue;
        }
        let claim = Claim {
            delivery_ids: polled
                .deliveries
                .into_iter()
                .map(|d| d.delivery_id)
                .collect(),
        };
        let claimed = match http
            .call("POST", &route(SeatRoute::Claim), Some(json!(claim)))
            .await
        {
            Ok((200, v)) => v,
            // A lost claim answer leaves those deliveries claimed: never
            // handed off twice, reconciled by their receipts.
            Ok((s, b)) => {
                tracing::warn!(status = s, body = %b, "claim refused");
                tokio::time::sleep(RETRY).await;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "claim answer lost");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        // An unreadable claim answer leaves its deliveries claimed, as a
        // lost one does.
        let Ok(Claimed {
            claim_id,
            deliveries,
        }) = serde_json::from_value::<Claimed>(claimed)
        else {
            tracing::warn!("claim answer unreadable");
            tokio::time::sleep(RETRY).await;
            continue;
        };
        let mut held = deliveries.into_iter();
        while let Some(d) = held.next() {
            let receipt = DeliveryRef {
                delivery_id: d.delivery_id.clone(),
                claim_id: claim_id.clone(),
            };
            match handoff(&up, codex.as_ref(), &d).await {
                Handoff::Done => {}
                Handoff::NotYet => {
                    // Definitely not handed off: release it and the rest.
                    for rest in std::iter::once(d).chain(held.by_ref()) {
                        let release = DeliveryRef {
                            delivery_id: rest.delivery_id,
                            claim_id: claim_id.clone(),
                        };
                        let _ = http
                            .call("POST", &route(SeatRoute::Release), Some(json!(release)))
                            .await;
                    }
                    tokio::time::sleep(RETRY).await;
                    break;
                }
                Handoff::Uncertain => {
                    tracing::warn!("handoff to the harness failed; the delivery stays claimed");
                    continue;
                }
            }
            let body = json!(receipt);
            for attempt in 0..3 {
                match http
                    .call("POST", &route(SeatRoute::Ack), Some(body.clone()))
                    .await
                {
                    Ok((200, _)) => break,
                    Ok((s, b)) => {
                        tracing::warn!(status = s, body = %b, "delivery receipt refused");
                        break;
                    }
                    Err(e) if attempt == 2 => {
                        tracing::warn!(error = %e, "delivery receipt not recorded")
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }
    }
}

pub(crate) enum Handoff {
    Done,
    /// No harness session yet: definitely not handed off.
    NotYet,
    /// The notification may or may not have reached the harness.
    Uncertain,
}

/// Hands one delivery to the harness: a turn on a Codex thread through
/// Codex's app-server, else Claude Code's channel notification.
async fn handoff(up: &Gateway, codex: Option<&CodexThreads>, d: &Delivery) -> Handoff {
    if let Some(codex) = codex {
        return codex.deliver(d).await;
    }
    let Some(peer) = up.echo.listening_harness().await else {
        return Handoff::NotYet;
    };
    let mut meta = serde_json::Map::new();
    meta.insert("source".into(), json!(d.kind.source()));
    meta.insert("from".into(), json!(d.from));
    meta.insert("delivery_id".into(), json!(d.delivery_id));
    for (value, key) in [
        (&d.peer_message_id, "peer_message_id"),
        (&d.follows, "follows"),
    ] {
        if !value.is_empty() {
            meta.insert(key.into(), json!(value));
        }
    }
    let params = json!({ "content": d.text, "meta": meta });
    match peer
        .send_notification(ServerNotification::CustomNotification(
            CustomNotification::new(CHANNEL_METHOD, Some(params)),
        ))
        .await
    {
        Ok(()) => Handoff::Done,
        Err(_) => Handoff::Uncertain,
    }
}
