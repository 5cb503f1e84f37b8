//! What the gateway follows from the services, into `Shared`: mcp-host's
//! catalog and account-wide log feed, and admission's fleet settings. Each
//! is a server stream, followed again with backoff whenever it breaks.

use std::sync::Arc;
use std::time::Duration;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use tokio_stream::StreamExt as _;
use tokio_util::sync::CancellationToken;

use crate::Shared;

/// Follows a server stream, reconnecting with backoff, until shutdown.
/// `apply` takes each item (storing it, or starting what it asks for).
pub(crate) async fn follow<T, C, Fut>(
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    connect: C,
    apply: impl Fn(&Arc<Shared>, T),
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

/// Follows mcp-host's catalog: a new revision or connected set is news.
pub async fn watch_catalog(shared: Arc<Shared>, shutdown: CancellationToken) {
    follow(
        shared,
        shutdown,
        |s| async move {
            s.mcp
                .clone()
                .watch_catalog(mcphost_pb::CatalogRequest {})
                .await
        },
        // Sessions hear of a change through `announce`, coalesced.
        |s, info: mcphost_pb::CatalogInfo| {
            let changed = s.catalog.send_if_modified(|cur| {
                let changed = cur.revision != info.revision || cur.connected != info.connected;
                if changed {
                    *cur = info;
                }
                changed
            });
            if changed {
                s.console.changed();
            }
        },
    )
    .await
}

/// Follows the admission service's settings: fleet.tools changes what every
/// session lists.
pub async fn watch_settings(shared: Arc<Shared>, shutdown: CancellationToken) {
    follow(
        shared,
        shutdown,
        |s| async move {
            s.admission
                .clone()
                .watch_settings(admission_pb::WatchSettingsRequest {})
                .await
        },
        |s, settings: admission_pb::FleetSettings| {
            let changed = s.settings.send_if_modified(|cur| {
                let changed =
                    cur.tools != settings.tools || cur.peer_messages != settings.peer_messages;
                if changed {
                    *cur = settings;
                }
                changed
            });
            if changed {
                s.console.changed();
            }
        },
    )
    .await
}

/// Follows mcp-host's account-wide log feed into `shared.log_lines`.
pub(crate) async fn watch_logs(shared: Arc<Shared>, shutdown: CancellationToken) {
    follow(
        shared,
        shutdown,
        |s| async move {
            s.mcp
                .clone()
                .watch_logs(mcphost_pb::WatchLogsRequest {})
                .await
        },
        |shared, line: mcphost_pb::LogLine| {
            // Nobody reading is not an error.
            let _ = shared.log_lines.send(line);
        },
    )
    .await;
}
