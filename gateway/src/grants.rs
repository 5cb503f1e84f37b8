//! Manual grant bearers on `/mcp`. The mcp-host owns the grant book: the
//! gateway asks it who a bearer is on every request, and follows its
//! revocations to close every session of a revoked grant.

use std::sync::Arc;
use std::time::Duration;

use clankie_proto::common::v1::{AdmissionMode, Principal};
use clankie_proto::mcphost::v1 as mpb;
use clankie_runtime::ClankieError;
use tokio_stream::StreamExt as _;
use tokio_util::sync::CancellationToken;

use crate::{Admitted, Shared, sessions};

/// A bearer that starts so is a manual grant's, never a fleet link's.
pub const BEARER_PREFIX: &str = "clkg_";

/// The principal a grant's sessions belong to: that grant alone.
fn principal(grant_id: &str) -> Principal {
    Principal {
        fleet_id: "grant".into(),
        pane_id: String::new(),
        mode: AdmissionMode::Grant as i32,
        link_id: grant_id.to_string(),
    }
}

/// Admits a request carrying a grant bearer while the grant is active.
pub async fn admit(shared: &Shared, bearer: &str) -> Result<Admitted, ClankieError> {
    let mut call = tonic::Request::new(mpb::AuthenticateGrantRequest {
        bearer: bearer.to_string(),
    });
    call.set_timeout(Duration::from_secs(5));
    let grant = shared
        .mcp
        .clone()
        .authenticate_grant(call)
        .await
        .map_err(|s| {
            let e = ClankieError::from_status(&s);
            tracing::info!(reason = e.code.as_str(), "grant.admission.refused");
            e
        })?
        .into_inner();
    Ok(Admitted {
        ticket: String::new(),
        principal: principal(&grant.grant_id),
        tools_on: false,
        grant: Some(bearer.to_string()),
    })
}

/// Follows the mcp-host's revocations: every session of a revoked grant is
/// closed on every listener. (A request under it is refused anyway, since
/// each one is authenticated again.)
pub async fn watch_revocations(shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let stream = shared
            .mcp
            .clone()
            .watch_revocations(mpb::WatchRevocationsRequest {})
            .await;
        if let Ok(stream) = stream {
            backoff = Duration::from_millis(100);
            let mut stream = stream.into_inner();
            loop {
                let item = tokio::select! {
                    i = stream.next() => i,
                    _ = shutdown.cancelled() => return,
                };
                let Some(Ok(revocation)) = item else { break };
                let owner = sessions::owner_key(&principal(&revocation.grant_id));
                let listeners: Vec<Arc<sessions::Sessions>> = shared.listeners.lock().clone();
                let mut closed = 0;
                for s in listeners {
                    closed += s.close_owner(&owner).await;
                }
                tracing::info!(closed, "grant.sessions.closed");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(3));
    }
}
