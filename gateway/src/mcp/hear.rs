//! What a caller hears while its connected call runs, and the log lines a
//! session asked for.
//!
//! - **Progress.** A `tools/call` that carries a `progressToken` is
//!   forwarded with `CallToolEvents`; each upstream progress step comes
//!   back under the caller's own token, on the request's stream.
//! - **Log lines.** A session chooses its level with `logging/setLevel`
//!   (or one request with the `io.modelcontextprotocol/logLevel` meta key).
//!   A fleet session then reads every connected account's lines from the
//!   host's feed while fleet tools are on: it can call every tool of those
//!   accounts already. A grant session hears only the lines mcp-host could
//!   place on its own call (see `mcp-host/src/relay.rs`).
//!
//! A call with nothing to hear is forwarded unary (`fleet::call::forward`).

// rmcp marks MCP logging deprecated (SEP-2577); clients still set and read it.
#![allow(deprecated, reason = "MCP logging is still what clients set and read")]

use std::sync::Arc;

use clankie_proto::common::v1::FleetTools;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_types::log_level;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use rmcp::service::{Peer, RoleServer};

use crate::Shared;
use crate::fleet::call::Listener;

/// The per-request meta key that sets one request's log level.
const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// One session's chosen log level, shared by its requests.
#[derive(Clone, Default)]
pub(crate) struct SessionLevel {
    level: Arc<parking_lot::Mutex<Option<String>>>,
    /// Set once the session's feed reader runs (fleet sessions only).
    reading: Arc<std::sync::atomic::AtomicBool>,
}

impl SessionLevel {
    /// Keeps `level` (an MCP level name) for the session.
    pub(crate) fn set(&self, level: String) {
        *self.level.lock() = Some(level);
    }

    fn get(&self) -> Option<String> {
        self.level.lock().clone()
    }

    /// Starts the session's reader of the account-wide feed, once.
    pub(crate) fn read_feed(&self, shared: Arc<Shared>, peer: Peer<RoleServer>) {
        use std::sync::atomic::Ordering;
        if self.reading.swap(true, Ordering::SeqCst) {
            return;
        }
        tokio::spawn(deliver_feed(shared, peer, self.clone()));
    }
}

/// What one call's caller asked to hear.
pub(crate) struct Hearing {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    log_level: String,
}

impl Hearing {
    /// `None` when the caller asked for nothing: the call goes unary.
    /// `own_lines` is whether this caller hears lines on its call (a grant
    /// session) rather than from the feed.
    pub(crate) fn asked(
        peer: &Peer<RoleServer>,
        meta: &RequestMetaObject,
        session: &SessionLevel,
        own_lines: bool,
    ) -> Option<Hearing> {
        let token = meta.get_progress_token();
        let log_level = if own_lines {
            meta.0
                .get(LOG_LEVEL_META)
                .and_then(|v| v.as_str())
                .map(str::to_string)
                .or_else(|| session.get())
                .filter(|l| log_level::rank(l).is_some())
                .unwrap_or_default()
        } else {
            String::new()
        };
        (token.is_some() || !log_level.is_empty()).then(|| Hearing {
            peer: peer.clone(),
            token,
            log_level,
        })
    }
}

impl Listener for Hearing {
    fn wants_progress(&self) -> bool {
        self.token.is_some()
    }

    fn log_level(&self) -> &str {
        &self.log_level
    }

    async fn progress(&self, p: mcphost_pb::CallProgress) {
        let Some(token) = &self.token else { return };
        let mut step = ProgressNotificationParam::new(token.clone(), p.progress);
        step.total = p.total;
        step.message = (!p.message.is_empty()).then_some(p.message);
        // A caller that stopped reading loses a step, not the call.
        let _ = self.peer.notify_progress(step).await;
    }

    async fn line(&self, line: mcphost_pb::LogLine) {
        send_line(&self.peer, line).await
    }
}

/// One log line to a session, as MCP's `notifications/message`; the logger
/// names the account it came from.
async fn send_line(peer: &Peer<RoleServer>, line: mcphost_pb::LogLine) {
    let Ok(level) = serde_json::from_value::<LoggingLevel>(serde_json::json!(line.level)) else {
        return;
    };
    let data = serde_json::from_str(&line.data_json).unwrap_or(serde_json::Value::Null);
    let logger = if line.logger.is_empty() {
        line.account
    } else {
        format!("{}/{}", line.account, line.logger)
    };
    let _ = peer
        .notify_logging_message(
            LoggingMessageNotificationParam::new(level, data).with_logger(logger),
        )
        .await;
}

/// A fleet session's reader: every feed line at or above the session's
/// level, while fleet tools are on, until the session's transport closes.
async fn deliver_feed(shared: Arc<Shared>, peer: Peer<RoleServer>, session: SessionLevel) {
    let mut lines = shared.log_lines.subscribe();
    loop {
        let line = match lines.recv().await {
            Ok(line) => line,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        if peer.is_transport_closed() {
            return;
        }
        let on = shared.settings.borrow().tools == FleetTools::Connected as i32;
        let chosen = session.get().unwrap_or_default();
        if on && log_level::reaches(&line.level, &chosen) {
            send_line(&peer, line).await;
        }
    }
}
