//! `tools/list_changed`, announced to every session (coalesced) when what a
//! member would list changes.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::Shared;

/// Sends `notifications/tools/list_changed` to every session still open.
async fn notify_all(shared: &Shared) {
    let peers: Vec<_> = {
        let mut peers = shared.peers.lock();
        peers.retain(|p| !p.is_transport_closed());
        peers.clone()
    };
    for peer in peers {
        if let Err(e) = peer.notify_tool_list_changed().await {
            tracing::debug!(error = %e, "list_changed not delivered");
        }
    }
}

/// How long the tool list must hold still before sessions hear it changed.
const COALESCE: Duration = Duration::from_millis(500);

/// What a session's tool list depends on.
fn listing(shared: &Shared) -> (u64, Vec<String>, i32, bool) {
    let c = shared.catalog.borrow();
    let s = shared.settings.borrow();
    (c.revision, c.connected.clone(), s.tools, s.peer_messages)
}

/// Tells every session its tool list changed, coalesced: a burst of changes
/// (accounts verifying at start, an upstream flapping) is one announcement
/// once the list holds still for [`COALESCE`], and a change undone within
/// it is none.
pub async fn announce(shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut catalog = shared.catalog.subscribe();
    let mut settings = shared.settings.subscribe();
    let mut last = listing(&shared);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = catalog.changed() => if r.is_err() { return },
            r = settings.changed() => if r.is_err() { return },
        }
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(COALESCE) => break,
                r = catalog.changed() => if r.is_err() { return },
                r = settings.changed() => if r.is_err() { return },
            }
        }
        let now = listing(&shared);
        if now != last {
            last = now;
            shared.announced.send_modify(|n| *n += 1);
            notify_all(&shared).await;
        }
    }
}
