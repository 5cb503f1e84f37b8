//! MCP sessions belong to the principal that opened them.
//!
//! The `mcp-session-id` a client presents is only a name, and names leak
//! (a log line, a proxy, a shared terminal). So the admission middleware
//! records, when a session is created, who created it: for an admitted pane
//! the fleet, link and pane; for a bearer link that link. A request or a
//! DELETE naming a session answers only that principal. Anyone else, and
//! any name we did not hand out, gets `session_not_found` (HTTP 404, as the
//! MCP transport answers an unknown session), so a guess learns nothing
//! about whether the session exists.
//!
//! Session ids are never logged here; rmcp's own logs, which name them,
//! are filtered out in telemetry.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use clankie_runtime::{ClankieError, ErrorCode};
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
/// How often expired sessions are dropped from the owner table.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

pub use clankie_runtime::principal::owner_key;

fn too_many(message: String) -> ClankieError {
    tracing::info!(
        reason = ErrorCode::TooManySessions.as_str(),
        "gateway.session.refused"
    );
    ErrorCode::TooManySessions.err(message)
}

/// The session a request names, if any (a name that is not text counts as
/// one, so it is never taken for a new session).
pub fn named(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .map(|v| v.to_str().unwrap_or("").to_string())
}

/// How many sessions may be open at once.
#[derive(Clone, Copy, Debug)]
pub struct SessionCaps {
    /// On one listener, for everyone.
    pub total: usize,
    /// For one principal (a pane, or a bearer link).
    pub per_principal: usize,
}

impl Default for SessionCaps {
    fn default() -> Self {
        SessionCaps {
            total: 4096,
            per_principal: 64,
        }
    }
}

/// The sessions of one listener and who opened each.
pub struct Sessions {
    pub manager: Arc<LocalSessionManager>,
    owners: Mutex<HashMap<String, String>>,
    /// Requests being answered, by session and JSON-RPC id.
    in_flight: Arc<Mutex<HashSet<(String, String)>>>,
    caps: SessionCaps,
}

/// Holds one request's (session, id) while it is answered; dropping it (the
/// response body finished or was abandoned) frees the id.
pub struct InFlight {
    set: Arc<Mutex<HashSet<(String, String)>>>,
    keys: Vec<(String, String)>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut set = self.set.lock();
        for k in &self.keys {
            set.remove(k);
        }
    }
}

impl Sessions {
    pub fn new(manager: Arc<LocalSessionManager>, caps: SessionCaps) -> Arc<Sessions> {
        Arc::new(Sessions {
            manager,
            owners: Mutex::new(HashMap::new()),
            in_flight: Arc::new(Mutex::new(HashSet::new())),
            caps,
        })
    }

    /// How many sessions are open on this listener.
    pub fn open(&self) -> usize {
        self.owners().len()
    }

    /// Claims the JSON-RPC ids of a request on its session. An id already
    /// being answered on the same session is refused: the transport would
    /// route both answers to one of them, and the other would never end.
    pub fn claim(&self, session: &str, ids: &[String]) -> Result<InFlight, ClankieError> {
        let mut set = self.in_flight.lock();
        let keys: Vec<(String, String)> = ids
            .iter()
            .map(|id| (session.to_string(), id.clone()))
            .collect();
        let unique: HashSet<&(String, String)> = keys.iter().collect();
        if unique.len() != keys.len() || keys.iter().any(|k| set.contains(k)) {
            return Err(ErrorCode::InvalidArgument.err(
                "a request with this JSON-RPC id is still being answered on this session; use a new id",
            ));
        }
        for k in &keys {
            set.insert(k.clone());
        }
        Ok(InFlight {
            set: self.in_flight.clone(),
            keys,
        })
    }

    /// Before a request that would open a session: refuses past the caps.
    /// Sessions that expired are dropped from the count first.
    pub async fn check_room(&self, owner: &str) -> Result<(), ClankieError> {
        let (mine, total) = self.counts(owner);
        if mine < self.caps.per_principal && total < self.caps.total {
            return Ok(());
        }
        self.drop_expired().await;
        let (mine, total) = self.counts(owner);
        if mine >= self.caps.per_principal {
            return Err(too_many(format!(
                "this caller already has {mine} open sessions (at most {}); close one with DELETE or reuse it",
                self.caps.per_principal
            )));
        }
        if total >= self.caps.total {
            return Err(too_many(format!(
                "the gateway holds its most sessions ({}); retry after some close",
                self.caps.total
            )));
        }
        Ok(())
    }

    fn counts(&self, owner: &str) -> (usize, usize) {
        let owners = self.owners();
        let mine = owners.values().filter(|o| o.as_str() == owner).count();
        (mine, owners.len())
    }

    fn owners(&self) -> parking_lot::MutexGuard<'_, HashMap<String, String>> {
        self.owners.lock()
    }

    /// Before a request runs: the session it names must be the caller's.
    pub fn check(&self, headers: &http::HeaderMap, owner: &str) -> Result<(), ClankieError> {
        let Some(id) = headers.get(SESSION_HEADER) else {
            return Ok(());
        };
        let known = id
            .to_str()
            .ok()
            .and_then(|id| self.owners().get(id).cloned());
        match known {
            Some(o) if o == owner => Ok(()),
            _ => {
                tracing::info!(
                    reason = ErrorCode::SessionNotFound.as_str(),
                    "gateway.session.refused"
                );
                Err(ErrorCode::SessionNotFound
                    .err("no such session for this caller; initialize a new one"))
            }
        }
    }

    /// After a request ran: a new session is recorded as the caller's, a
    /// deleted one is forgotten. `named` is the session the request named.
    pub fn settle(&self, deleting: bool, named: Option<&str>, resp: &Response, owner: &str) {
        match named {
            Some(id) if deleting && resp.status().is_success() => {
                self.owners().remove(id);
            }
            Some(_) => {}
            None => {
                if let Some(id) = resp
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                {
                    self.owners().insert(id.to_string(), owner.to_string());
                }
            }
        }
    }

    /// Closes every session `owner` holds (a revoked grant's): the
    /// transport ends them and their pending requests. Returns how many.
    pub async fn close_owner(&self, owner: &str) -> usize {
        let ids: Vec<String> = self
            .owners()
            .iter()
            .filter(|(_, o)| o.as_str() == owner)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            let _ = self.manager.close_session(&id.as_str().into()).await;
            self.owners().remove(id);
        }
        ids.len()
    }

    /// Drops owners of sessions the manager no longer has (idle expiry).
    pub async fn prune(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(PRUNE_EVERY) => {}
            }
            self.drop_expired().await;
        }
    }

    async fn drop_expired(&self) {
        let ids: Vec<String> = self.owners().keys().cloned().collect();
        for id in ids {
            let live = self
                .manager
                .has_session(&id.as_str().into())
                .await
                .unwrap_or(false);
            if !live {
                self.owners().remove(&id);
            }
        }
    }
}
