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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::Response;
use clankie_runtime::{ClankieError, ErrorCode};
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

const SESSION_HEADER: &str = "mcp-session-id";
/// How often expired sessions are dropped from the owner table.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

pub use clankie_runtime::principal::owner_key;

/// The session a request names, if any (a name that is not text counts as
/// one, so it is never taken for a new session).
pub fn named(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .map(|v| v.to_str().unwrap_or("").to_string())
}

/// The sessions of one listener and who opened each.
pub struct Sessions {
    pub manager: Arc<LocalSessionManager>,
    owners: Mutex<HashMap<String, String>>,
}

impl Sessions {
    pub fn new(manager: Arc<LocalSessionManager>) -> Arc<Sessions> {
        Arc::new(Sessions {
            manager,
            owners: Mutex::new(HashMap::new()),
        })
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.owners.lock().unwrap_or_else(|p| p.into_inner())
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

    /// Drops owners of sessions the manager no longer has (idle expiry).
    pub async fn prune(self: Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(PRUNE_EVERY) => {}
            }
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
}
