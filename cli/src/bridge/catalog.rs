//! The catalog watch of a bridge without the seat channel (a harness that
//! reads its deliveries itself, like Pi's extension, or `--no-channel`).
//! The seat channel's mailbox poll carries the catalog revision; without
//! it the bridge long-polls the catalog alone, so a change reaches its
//! harness even when the gateway's MCP stream is gone (a stack restart
//! ends it, and nothing reopens it until the harness asks).
//!
//! - `GET /v1/fleet/seats/{pane}/tool-catalog?wait=25000&revision=R` on
//!   one kept-alive connection; a changed revision carries the new listing
//!   (else the bridge lists again), and its harness hears of it only if
//!   the tools really changed.
//! - An unchanged catalog is still listed again every 5 minutes.
//! - With no fresh revision (a failing poll, a refusal, a 404 from a
//!   service without the route) the bridge lists every 5 s, and tries the
//!   long poll again after 5 minutes.
//! - Failures, admission refusals included, keep the verified tools: a
//!   relist that fails changes nothing (`Upstream::refresh`).

use clankie_types::fleet::seat::{CatalogAnswer, SeatRoute};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::gateway::{Gateway, Http, encode};

const WAIT_MS: u64 = 25_000;
/// An unchanged catalog is listed again this often.
const RECHECK: Duration = Duration::from_secs(300);
/// Without a fresh revision: how often to list, and when to poll again.
const FALLBACK_EVERY: Duration = Duration::from_secs(5);
const FALLBACK_FOR: Duration = Duration::from_secs(300);

/// Runs the watch until the process exits.
pub async fn run(up: Arc<Gateway>, socket: String, pane: String) {
    let mut http = Http::new(socket);
    let base = SeatRoute::ToolCatalog.path(&encode(&pane));
    let mut revision = String::new();
    let mut listed = Instant::now();
    loop {
        if up.is_quiet() {
            tokio::time::sleep(FALLBACK_EVERY).await;
            continue;
        }
        let path = format!("{base}?wait={WAIT_MS}&revision={}", encode(&revision));
        let fresh = match http.call("GET", &path, None).await {
            Ok((200, body)) => serde_json::from_value::<CatalogAnswer>(body).ok(),
            Ok((status, _)) => {
                tracing::debug!(status, "catalog poll refused");
                None
            }
            Err(e) => {
                tracing::debug!(error = %e, "catalog poll failed");
                None
            }
        };
        match fresh {
            Some(answer) => {
                // The first revision is a change too: the bridge listed
                // before it knew one.
                let changed = answer.catalog_revision != revision;
                revision = answer.catalog_revision;
                match answer.listing {
                    Some(listing) if changed => {
                        up.carry(listing);
                        listed = Instant::now();
                    }
                    _ if changed || listed.elapsed() >= RECHECK => {
                        up.relist.notify_one();
                        listed = Instant::now();
                    }
                    _ => {}
                }
            }
            None => {
                // No revision to wait on: list on a short cadence for a
                // while, then try the long poll again.
                revision.clear();
                let until = Instant::now() + FALLBACK_FOR;
                while Instant::now() < until {
                    if !up.is_quiet() {
                        up.relist.notify_one();
                    }
                    tokio::time::sleep(FALLBACK_EVERY).await;
                }
                listed = Instant::now();
            }
        }
    }
}
