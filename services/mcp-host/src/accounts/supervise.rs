//! The supervisor of one account: connects, verifies, restarts a dead
//! connection with bounded backoff, re-lists on a change.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::now_ms;
use tokio::sync::Notify;

use super::connection::{Upstream, hear_every_level, list_tools, open_connection};
use super::stderr::{StderrTail, with_tail};
use super::{CONNECT_TIMEOUT, HEALTHY_PERIOD, MAX_BACKOFF, MIN_BACKOFF};
use super::{Registry, Slot, lock};

/// How long a failed attempt waits for its server's stderr to end.
const STDERR_WAIT: Duration = Duration::from_millis(500);

pub(super) async fn supervise(registry: Registry, slot: Arc<Slot>) {
    let name = slot.config.name.clone();
    let mut backoff = MIN_BACKOFF;
    let mut restarts = 0u32;
    loop {
        if slot.cancel.is_cancelled() {
            break;
        }
        slot.live.send_modify(|l| {
            l.state = mcphost_pb::AccountState::Verifying;
            l.restarts = restarts;
        });
        let relist = Arc::new(Notify::new());
        let mut tail = StderrTail::new();
        let attempt = tokio::select! {
            r = tokio::time::timeout(CONNECT_TIMEOUT, open_connection(
                &slot.config,
                Upstream { relist: relist.clone() },
                registry.relay().observer(&name),
                &mut tail,
                registry.stderr_log(&name),
            )) => {
                r.unwrap_or_else(|_| Err("initialize timed out".into()))
            }
            _ = slot.cancel.cancelled() => break,
        };
        let running = match attempt {
            Ok(r) => r,
            Err(e) => {
                // The log names the failure; the server's own words go to
                // the account's error and its log, never to ours.
                tracing::warn!(account = %name, error = %e, "account unavailable");
                let error = with_tail(&e, &tail.last(STDERR_WAIT).await);
                slot.live.send_modify(|l| {
                    l.state = mcphost_pb::AccountState::Unavailable;
                    l.last_error = error;
                    l.tools = Arc::new(Vec::new());
                });
                registry.rebuild();
                registry.first_verdict(&name);
                if !wait_backoff(&slot, &mut backoff).await {
                    break;
                }
                restarts += 1;
                continue;
            }
        };
        let peer = running.peer().clone();
        let info = peer.peer_info();
        hear_every_level(&peer).await;
        match list_tools(&peer).await {
            Ok(tools) => {
                // The connection is in place before anyone hears it is
                // verified, so whoever hears can use it at once.
                *lock(&slot.peer) = Some(peer.clone());
                slot.live.send_modify(|l| {
                    l.state = mcphost_pb::AccountState::Verified;
                    l.tools = Arc::new(tools);
                    l.last_error.clear();
                    l.verified_at_ms = now_ms();
                    if let Some(info) = &info {
                        l.protocol_version = info.protocol_version.to_string();
                        if let Some(s) = &info.server_info {
                            l.identity_name = s.name.clone();
                            l.identity_version = s.version.clone();
                        }
                    }
                });
                registry.rebuild();
                registry.first_verdict(&name);
                tracing::info!(account = %name, tools = slot.live.borrow().tools.len(), "account verified");
            }
            Err(e) => {
                let _ = running.cancel().await;
                let error = with_tail(&e, &tail.last(STDERR_WAIT).await);
                slot.live.send_modify(|l| {
                    l.state = mcphost_pb::AccountState::Unavailable;
                    l.last_error = error;
                });
                registry.rebuild();
                registry.first_verdict(&name);
                if !wait_backoff(&slot, &mut backoff).await {
                    break;
                }
                restarts += 1;
                continue;
            }
        }
        let healthy_since = tokio::time::Instant::now();
        let ct = running.cancellation_token();
        let waiting = running.waiting();
        tokio::pin!(waiting);
        let cancelled = loop {
            tokio::select! {
                _ = &mut waiting => break false,
                _ = relist.notified() => {
                    match list_tools(&peer).await {
                        Ok(tools) => {
                            slot.live.send_modify(|l| l.tools = Arc::new(tools));
                            registry.rebuild();
                            tracing::info!(account = %name, "account tools changed upstream");
                        }
                        Err(e) => tracing::warn!(account = %name, error = %e, "relist failed"),
                    }
                }
                _ = slot.cancel.cancelled() => break true,
            }
        };
        *lock(&slot.peer) = None;
        if cancelled {
            // Let already dispatched calls settle before closing.
            let _ = tokio::time::timeout(crate::COMPLETION_LIFETIME, async {
                while slot.inflight.load(Ordering::Acquire) > 0 {
                    let idle = slot.idle.notified();
                    if slot.inflight.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    idle.await;
                }
            })
            .await;
            ct.cancel();
            let _ = waiting.await;
            break;
        }
        // The backoff resets only after a healthy period: an upstream that
        // dies on every call keeps backing off instead of restarting at the
        // minimum forever.
        if healthy_since.elapsed() >= HEALTHY_PERIOD {
            backoff = MIN_BACKOFF;
        }
        tracing::warn!(account = %name, backoff_ms = backoff.as_millis() as u64, "account connection closed; restarting");
        let error = with_tail(
            "the server closed the connection",
            &tail.last(STDERR_WAIT).await,
        );
        slot.live.send_modify(|l| {
            l.state = mcphost_pb::AccountState::Unavailable;
            l.last_error = error;
            l.tools = Arc::new(Vec::new());
        });
        registry.rebuild();
        if !wait_backoff(&slot, &mut backoff).await {
            break;
        }
        restarts += 1;
    }
    *lock(&slot.peer) = None;
}

pub(super) async fn wait_backoff(slot: &Slot, backoff: &mut Duration) -> bool {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = slot.cancel.cancelled() => false,
    }
}
