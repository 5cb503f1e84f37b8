//! Watchers: the catalog and the fleet settings followed from their
//! services, and `tools/list_changed` announced to every session (coalesced)
//! when what a member would list changes.

use super::*;

/// Sends `notifications/tools/list_changed` to every session still open.
pub(super) async fn notify_all(shared: &Shared) {
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

/// Follows a server stream, reconnecting with backoff, until shutdown.
/// `apply` stores an item and says whether sessions must hear that their
/// tool list changed.
pub(super) async fn follow<T, C, Fut>(
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    connect: C,
    apply: impl Fn(&Shared, T) -> bool,
) where
    C: Fn(Arc<Shared>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>>,
{
    let mut backoff = Duration::from_millis(100);
    loop {
        if let Ok(stream) = connect(shared.clone()).await {
            backoff = Duration::from_millis(100);
            let mut stream = stream.into_inner();
            loop {
                let item = tokio::select! {
                    i = stream.next() => i,
                    _ = shutdown.cancelled() => return,
                };
                let Some(Ok(item)) = item else { break };
                // Sessions hear of it through `announce`, coalesced.
                apply(&shared, item);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(3));
    }
}

/// How long the tool list must hold still before sessions hear it changed.
pub(super) const COALESCE: Duration = Duration::from_millis(500);

/// What a session's tool list depends on.
pub(super) fn listing(shared: &Shared) -> (u64, Vec<String>, i32, bool) {
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

/// Follows mcp-host's catalog: a new revision or connected set is news.
pub async fn watch_catalog(shared: Arc<Shared>, shutdown: CancellationToken) {
    follow(
        shared,
        shutdown,
        |s| async move { s.mcp.clone().watch_catalog(mpb::CatalogRequest {}).await },
        |s, info: mpb::CatalogInfo| {
            s.catalog.send_if_modified(|cur| {
                let changed = cur.revision != info.revision || cur.connected != info.connected;
                if changed {
                    *cur = info;
                }
                changed
            })
        },
    )
    .await
}

/// Follows the admission service's settings: fleet.tools changes what every
/// session lists.
pub async fn watch_settings(shared: Arc<Shared>, shutdown: CancellationToken) {
    use clankie_proto::admission::v1 as apb;
    follow(
        shared,
        shutdown,
        |s| async move {
            s.admission
                .clone()
                .watch_settings(apb::WatchSettingsRequest {})
                .await
        },
        |s, settings: apb::FleetSettings| {
            s.settings.send_if_modified(|cur| {
                let changed =
                    cur.tools != settings.tools || cur.peer_messages != settings.peer_messages;
                if changed {
                    *cur = settings;
                }
                changed
            })
        },
    )
    .await
}
