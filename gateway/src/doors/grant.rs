//! Manual grant bearers on `/mcp`. The mcp-host owns the grant book: the
//! gateway asks it who a bearer is on every request, and follows its
//! revocations to close every session of a revoked grant.

use clankie_runtime::clients::{Answer as _, Call, INTERNAL};
use std::sync::Arc;
use std::time::Duration;

use clankie_proto::common::v1::{AdmissionMode, Principal};
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::ClankieError;
use tokio_util::sync::CancellationToken;

use super::Admitted;
use crate::{Shared, sessions};

/// A bearer that starts so is a manual grant's, never a fleet link's.
pub const BEARER_PREFIX: &str = "clkg_";

/// The principal a grant's sessions belong to: that grant alone.
fn principal(grant_id: &str) -> Principal {
    Principal {
        fleet_id: "grant".into(),
        pane_id: String::new(),
        mode: AdmissionMode::Grant as i32,
        link_id: grant_id.to_string(),
        machine: String::new(),
    }
}

/// Admits a request carrying a grant bearer while the grant is active.
pub async fn admit(shared: &Shared, bearer: &str) -> Result<Admitted, ClankieError> {
    let call = Call::new(mcphost_pb::AuthenticateGrantRequest {
        bearer: bearer.to_string(),
    })
    .timeout(INTERNAL)
    .request();
    let grant = shared
        .mcp
        .clone()
        .authenticate_grant(call)
        .await
        .answer()
        .inspect_err(|e| tracing::info!(reason = e.code.as_str(), "grant.admission.refused"))?;
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
    crate::feeds::follow(
        shared,
        shutdown,
        |s| async move {
            s.mcp
                .clone()
                .watch_revocations(mcphost_pb::WatchRevocationsRequest {})
                .await
        },
        // Each revocation in a task of its own: one grant's draining never
        // holds up the next.
        |s, revocation: mcphost_pb::Revocation| {
            tokio::spawn(end_grant(s.clone(), revocation.grant_id));
        },
    )
    .await
}

/// Ends a revoked grant at the gateway: calls still running under it are
/// answered first, then its sessions close on every listener.
async fn end_grant(shared: Arc<Shared>, grant_id: String) {
    shared.grant_calls.stop(&grant_id);
    shared.grant_calls.drained(&grant_id, DRAIN).await;
    // The answers leave with their streams: give them that long before the
    // sessions go (nothing new runs meanwhile: every request under the
    // grant is authenticated again).
    tokio::time::sleep(FLUSH).await;
    let owner = sessions::owner_key(&principal(&grant_id));
    let listeners: Vec<Arc<sessions::Sessions>> = shared.listeners.lock().clone();
    let mut closed = 0;
    for s in listeners {
        closed += s.close_owner(&owner).await;
    }
    tracing::info!(closed, "grant.sessions.closed");
}

/// How long a revoke waits for the grant's running calls to be answered
/// before it closes their sessions anyway.
const DRAIN: Duration = Duration::from_secs(2);

/// How long answered calls get to reach their clients before the
/// revoked grant's sessions close.
const FLUSH: Duration = Duration::from_secs(1);

/// The grant calls the gateway is serving, by grant id, so a revoke can
/// answer them before their sessions close.
#[derive(Default)]
pub(crate) struct GrantCalls {
    calls: parking_lot::Mutex<std::collections::HashMap<String, (CancellationToken, usize)>>,
    idle: tokio::sync::Notify,
}

/// One call's place among its grant's calls; dropped when it is answered.
pub(crate) struct InFlight<'a> {
    calls: &'a GrantCalls,
    grant: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut calls = self.calls.calls.lock();
        if let Some((_, n)) = calls.get_mut(&self.grant) {
            *n -= 1;
            if *n == 0 {
                calls.remove(&self.grant);
            }
        }
        drop(calls);
        self.calls.idle.notify_waiters();
    }
}

impl GrantCalls {
    /// A call under `grant` starts: the token fires when the grant is revoked.
    pub(crate) fn enter(&self, grant: &str) -> (CancellationToken, InFlight<'_>) {
        let mut calls = self.calls.lock();
        let (token, n) = calls.entry(grant.to_string()).or_default();
        *n += 1;
        let token = token.clone();
        drop(calls);
        let place = InFlight {
            calls: self,
            grant: grant.to_string(),
        };
        (token, place)
    }

    /// The grant was revoked: its running calls answer now.
    pub(crate) fn stop(&self, grant: &str) {
        if let Some((token, _)) = self.calls.lock().get(grant) {
            token.cancel();
        }
    }

    /// Waits (at most `within`) until no call of `grant` is running.
    pub(crate) async fn drained(&self, grant: &str, within: Duration) {
        let _ = tokio::time::timeout(within, async {
            loop {
                let idle = self.idle.notified();
                if !self.calls.lock().contains_key(grant) {
                    return;
                }
                idle.await;
            }
        })
        .await;
    }
}
