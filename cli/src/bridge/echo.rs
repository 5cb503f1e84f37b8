//! What the gateway says while a call runs, passed on to the harness: the
//! progress steps of a call the harness gave a `progressToken`, and log
//! lines at the level the harness set, which the bridge forwards to the
//! gateway and sets again on every new gateway session.
//!
//! rmcp puts a progress token of its own on the request it sends to the
//! gateway, so a step comes back under that token; [`Echo::call`] binds it
//! to the call as soon as the request has left, and passes each step on
//! under the token the harness chose. Steps are taken off the gateway
//! session's transport ([`Echo::observer`]) in the order they were sent,
//! so every step of a call reaches the harness before the call's answer.

// rmcp marks MCP logging deprecated (SEP-2577); clients still set and read it.
#![allow(deprecated, reason = "MCP logging is still what clients set and read")]

use std::sync::Arc;
use std::time::Duration;

use clankie_runtime::progress::Routes;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest,
    LoggingLevel, LoggingMessageNotificationParam, NumberOrString, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, RequestParamsMeta as _, ServerResult, SetLevelRequestParams,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RoleClient, RoleServer};
use tokio::sync::{Mutex, Notify};

/// How long after the harness's first `tools/list` a pushed message can
/// be trusted to reach it (ten times what was observed).
const CHANNEL_SETTLE: Duration = Duration::from_secs(3);

/// Steps to a call in flight.
type Steps = tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>;

/// Calls in flight, by the progress token the bridge's request carried.
type Progress = Routes<String, Steps, ProgressNotificationParam>;

/// The most calls one bridge has in flight to the gateway at once. Each
/// HTTP/1.1 request holds a connection of its own, and the gateway bounds a
/// member's proven connections (64, `max_per_member` in the gateway's
/// `caps.rs`): half of that leaves room for the session's event stream, the
/// seat channel's long poll and a second bridge of the same pane. A harness
/// that sends more waits here, within the call's budget, instead of being
/// refused at the gateway's door.
pub(crate) const MAX_IN_FLIGHT: usize = 32;

/// The places for calls in flight (`MAX_IN_FLIGHT`).
#[derive(Clone)]
struct InFlight(Arc<tokio::sync::Semaphore>);

impl Default for InFlight {
    fn default() -> Self {
        InFlight(Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)))
    }
}

/// The harness's side, and the level it chose.
#[derive(Clone, Default)]
pub(crate) struct Echo {
    in_flight: InFlight,
    downstream: Arc<Mutex<Option<Peer<RoleServer>>>>,
    level: Arc<parking_lot::Mutex<Option<LoggingLevel>>>,
    progress: Arc<parking_lot::Mutex<Progress>>,
    /// When the harness's session began, and when it first asked for the
    /// tools.
    attached: Arc<std::sync::OnceLock<std::time::Instant>>,
    listed: Arc<std::sync::OnceLock<std::time::Instant>>,
}

/// A call that found no place within its budget: it was never sent, so it
/// is refused the way the gateway refuses what it did not forward.
fn no_place(budget: Duration) -> ServiceError {
    let code = clankie_runtime::ErrorCode::ServiceUnavailable;
    ServiceError::McpError(rmcp::model::ErrorData::internal_error(
        format!(
            "{MAX_IN_FLIGHT} calls of this bridge stayed in flight for {} s; this one was not sent",
            budget.as_secs()
        ),
        Some(serde_json::json!({ "code": code.as_str() })),
    ))
}

fn token_key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::Number(n) => format!("n:{n}"),
        NumberOrString::String(s) => format!("s:{s}"),
    }
}

impl Echo {
    fn routes(&self) -> parking_lot::MutexGuard<'_, Progress> {
        self.progress.lock()
    }

    /// One `tools/call` to the gateway within `budget`. When the harness
    /// gave a progress token, the gateway's steps reach it under that token.
    pub(crate) async fn call(
        &self,
        gateway: &Peer<RoleClient>,
        params: CallToolRequestParams,
        budget: Duration,
    ) -> Result<CallToolResult, ServiceError> {
        let waited = std::time::Instant::now();
        let Ok(Ok(_place)) = tokio::time::timeout(budget, self.in_flight.0.acquire()).await else {
            return Err(no_place(budget));
        };
        let budget = budget.saturating_sub(waited.elapsed());
        let Some(harness) = params.progress_token() else {
            return match tokio::time::timeout(budget, gateway.call_tool(params)).await {
                Ok(answer) => answer,
                Err(_) => Err(ServiceError::Timeout { timeout: budget }),
            };
        };
        self.routes().expect();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut options = PeerRequestOptions::no_options();
        options.timeout = Some(budget);
        let handle = match gateway.send_request_with_option(request, options).await {
            Ok(h) => h,
            Err(e) => {
                self.routes().abandon();
                return Err(e);
            }
        };
        let key = token_key(&handle.progress_token);
        let (tx, mut steps) = tokio::sync::mpsc::unbounded_channel();
        let early = self.routes().bind(key.clone(), tx);
        for step in early {
            self.progress_as(step, &harness).await;
        }
        let answer = handle.await_response();
        tokio::pin!(answer);
        let answer = loop {
            tokio::select! {
                biased;
                Some(step) = steps.recv() => self.progress_as(step, &harness).await,
                answer = &mut answer => break answer,
            }
        };
        self.routes().forget(&key);
        // Steps the tap took before the answer still go first.
        while let Ok(step) = steps.try_recv() {
            self.progress_as(step, &harness).await;
        }
        match answer? {
            ServerResult::CallToolResult(r) => Ok(r),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }

    /// What takes the progress steps off a gateway session's transport.
    pub(crate) fn observer(&self) -> clankie_runtime::mcp_tap::Observer {
        use rmcp::model::{JsonRpcMessage, ServerNotification};
        let progress = self.progress.clone();
        std::sync::Arc::new(move |message| {
            if let JsonRpcMessage::Notification(n) = message
                && let ServerNotification::ProgressNotification(p) = &n.notification
            {
                let key = token_key(&p.params.progress_token);
                let mut routes = progress.lock();
                if let Some((steps, step)) = routes.route(key, p.params.clone()) {
                    let _ = steps.send(step);
                }
            }
        })
    }

    async fn progress_as(&self, mut step: ProgressNotificationParam, harness: &ProgressToken) {
        step.progress_token = harness.clone();
        if let Some(peer) = self.harness().await {
            let _ = peer.notify_progress(step).await;
        }
    }

    /// The harness's session, once it is initialized.
    pub(crate) async fn attach(&self, peer: Peer<RoleServer>) {
        let _ = self.attached.set(std::time::Instant::now());
        *self.downstream.lock().await = Some(peer);
    }

    pub(crate) async fn harness(&self) -> Option<Peer<RoleServer>> {
        self.downstream.lock().await.clone()
    }

    /// The harness asked for the tools.
    pub(crate) fn mark_listed(&self) {
        let _ = self.listed.set(std::time::Instant::now());
    }

    /// The harness's session, once it is listening for pushed messages.
    /// Claude Code registers its channel listener only once it has the
    /// server's tools and its interface has caught up (observed on 2.1.332:
    /// 0.1 to 0.3 s after the first `tools/list`), and drops a notification
    /// that comes before, silently: nothing on the wire says it is ready.
    /// So a handoff waits [`CHANNEL_SETTLE`] after the session began and
    /// after that listing (a harness that never lists is settled once its
    /// session is that old).
    pub(crate) async fn listening_harness(&self) -> Option<Peer<RoleServer>> {
        let since = match (self.attached.get(), self.listed.get()) {
            (Some(a), Some(l)) => (*a).max(*l),
            (Some(a), None) => *a,
            (None, _) => return None,
        };
        if since.elapsed() < CHANNEL_SETTLE {
            return None;
        }
        self.harness().await
    }

    /// Keeps the harness's level and sets it on the gateway session (the
    /// bridge's `logging/setLevel`).
    pub(crate) async fn set_level(
        &self,
        level: LoggingLevel,
        gateway: Result<Peer<RoleClient>, String>,
    ) -> Result<(), rmcp::ErrorData> {
        let internal = |e: String| rmcp::ErrorData::internal_error(e, None);
        let gateway = gateway.map_err(internal)?;
        *self.level.lock() = Some(level);
        self.resend(&gateway).await.map_err(internal)
    }

    /// Sets the kept level on a (new) gateway session.
    pub(crate) async fn resend(&self, gateway: &Peer<RoleClient>) -> Result<(), String> {
        let Some(level) = *self.level.lock() else {
            return Ok(());
        };
        let sent = tokio::time::timeout(
            Duration::from_secs(10),
            gateway.set_level(SetLevelRequestParams::new(level)),
        )
        .await;
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("logging/setLevel timed out".into()),
        }
    }

    async fn line(&self, line: LoggingMessageNotificationParam) {
        if let Some(peer) = self.harness().await {
            let _ = peer.notify_logging_message(line).await;
        }
    }
}

/// The MCP client side of a bridge's gateway session.
pub(crate) struct GatewayHandler {
    pub(crate) name: &'static str,
    /// Told when the gateway says the tool list changed (the fleet bridge
    /// relists; a grant bridge lists on demand and passes `None`).
    pub(crate) relist: Option<Arc<Notify>>,
    pub(crate) echo: Echo,
}

impl rmcp::ClientHandler for GatewayHandler {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info.client_info.name = self.name.into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(relist) = &self.relist {
            relist.notify_one();
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.echo.line(params).await;
    }
}
