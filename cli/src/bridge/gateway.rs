//! The bridge's way to the gateway: the MCP client session it keeps
//! (`Gateway`), and a small kept-alive HTTP client over the local socket
//! (`Http`) for the seat channel and review submissions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clankie_runtime::ErrorCode;
use clankie_types::fleet::catalog::CatalogSettings;
use clankie_types::fleet::seat::Listing;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rmcp::ServiceExt;
use rmcp::model::Tool;
use rmcp::service::{Peer, RoleClient, RunningService};
use serde_json::Value;
use tokio::sync::{Mutex, Notify, RwLock};

/// Every page of the gateway's tools, and the settings its first page says
/// they were served under.
async fn list_with_settings(
    peer: &Peer<RoleClient>,
) -> Result<(Vec<Tool>, Option<CatalogSettings>), rmcp::ServiceError> {
    let first = peer.list_tools(None).await?;
    let settings = first
        .meta
        .as_ref()
        .and_then(|m| CatalogSettings::read(&m.0));
    let mut tools = first.tools;
    let mut cursor = first.next_cursor;
    while let Some(c) = cursor {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c));
        let page = peer.list_tools(Some(params)).await?;
        tools.extend(page.tools);
        cursor = page.next_cursor;
    }
    Ok((tools, settings))
}

/// How long initial discovery keeps trying.
pub(crate) const DISCOVERY_WINDOW: Duration = Duration::from_secs(20);

/// The longest one discovery attempt may stall before it is abandoned and
/// tried again (never past the window).
pub(crate) const DISCOVERY_ATTEMPT: Duration = Duration::from_secs(5);

/// The total budget of one forwarded request.
pub(crate) const REQUEST_BUDGET: Duration = Duration::from_secs(30);

/// Where the gateway is reached.
pub(crate) enum Route {
    /// Streamable HTTP with a fleet bearer (remote links).
    Bearer { url: String, token: String },
    /// The gateway's local Unix socket: no token, the kernel proves the pane.
    Local { socket: String },
}

pub(crate) struct Gateway {
    pub(crate) route: Route,
    pub(crate) conn: Mutex<Option<RunningService<RoleClient, super::echo::GatewayHandler>>>,
    /// The last verified tool list.
    pub(crate) tools: RwLock<Option<Vec<Tool>>>,
    /// The settings that list was served under, when the gateway said.
    pub(crate) settings: RwLock<Option<CatalogSettings>>,
    pub(crate) last_error: RwLock<String>,
    pub(crate) relist: Arc<Notify>,
    /// A listing a seat poll carried, taken by the relist task instead of
    /// listing again.
    pub(crate) carried: parking_lot::Mutex<Option<Listing>>,
    /// The harness's side: list changes, progress and log lines.
    pub(crate) echo: super::echo::Echo,
    /// Set by a definite non-member refusal; automatic requests stop.
    pub(crate) quiet: std::sync::atomic::AtomicBool,
}

/// The refusal that silences automatic requests.
pub(crate) const NOT_MEMBER: ErrorCode = ErrorCode::LocalProcessMembershipRequired;

/// Reasons that mean nothing was forwarded (a refusal written at the
/// gateway's doors, before any tool is reached). `service_unavailable` is
/// a connection the gateway turned away before reading its request.
/// `too_many_connections` is the door's refusal of a member past its share
/// of connections.
const PRE_FORWARD: [ErrorCode; 8] = [
    ErrorCode::FleetCredentialRequired,
    ErrorCode::FleetCredentialInvalid,
    ErrorCode::FleetAdmissionUnavailable,
    ErrorCode::ServiceUnavailable,
    ErrorCode::FleetAdmissionRevoked,
    ErrorCode::LocalProcessMembershipRequired,
    ErrorCode::PayloadTooLarge,
    ErrorCode::TooManyConnections,
];

/// The pre-forward refusal a gateway error carries, if any: the code of
/// the refusal body the gateway wrote (`refusal.rs`).
pub(crate) fn pre_forward(msg: &str) -> Option<ErrorCode> {
    super::refusal::code_in(msg).filter(|c| PRE_FORWARD.contains(c))
}

/// One kept-alive HTTP/1.1 connection's sender.
pub(crate) type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

impl Gateway {
    /// Remembers whether the gateway last called this process a non-member.
    pub(crate) fn note_outcome<T>(&self, result: &Result<T, String>) {
        use std::sync::atomic::Ordering;
        match result {
            Err(e) if super::refusal::code_in(e) == Some(NOT_MEMBER) => {
                if !self.quiet.swap(true, Ordering::SeqCst) {
                    tracing::warn!(
                        "not admitted as a fleet member; automatic catalog refresh is quiet until the harness asks again"
                    );
                }
            }
            Ok(_) => self.quiet.store(false, Ordering::SeqCst),
            Err(_) => {}
        }
    }

    pub(crate) fn is_quiet(&self) -> bool {
        self.quiet.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) async fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let mut conn = self.conn.lock().await;
        if let Some(c) = conn.as_ref()
            && !c.is_closed()
        {
            return Ok(c.peer().clone());
        }
        use clankie_runtime::mcp_tap::Tap;
        use clankie_runtime::telemetry::{TraceHeaders, mcp_http_client};
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let handler = super::echo::GatewayHandler {
            name: "clankie-fleet-bridge",
            relist: Some(self.relist.clone()),
            echo: self.echo.clone(),
        };
        let started = match &self.route {
            Route::Bearer { url, token } => {
                let cfg = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .auth_header(token.clone())
                    .reinit_on_expired_session(true);
                let transport = StreamableHttpClientTransport::with_client(
                    TraceHeaders(mcp_http_client()),
                    cfg,
                );
                let transport = Tap::new(transport, self.echo.observer());
                tokio::time::timeout(Duration::from_secs(10), handler.serve(transport)).await
            }
            Route::Local { socket } => {
                let cfg = StreamableHttpClientTransportConfig::with_uri("http://localhost/mcp")
                    .reinit_on_expired_session(true);
                // One kept-alive connection is proven once, then rechecked.
                let client = clankie_runtime::telemetry::mcp_unix_client(socket.as_ref());
                let transport =
                    StreamableHttpClientTransport::with_client(TraceHeaders(client), cfg);
                let transport = Tap::new(transport, self.echo.observer());
                tokio::time::timeout(Duration::from_secs(10), handler.serve(transport)).await
            }
        };
        let running = started
            .map_err(|_| "the gateway did not answer initialize in 10 s".to_string())?
            .map_err(|e| super::refusal::status_refusal(&e).unwrap_or_else(|| e.to_string()))?;
        let peer = running.peer().clone();
        *conn = Some(running);
        // A new gateway session hears the harness's log level again.
        if let Err(e) = self.echo.resend(&peer).await {
            tracing::debug!(error = %e, "log level not set on the new session");
        }
        Ok(peer)
    }

    /// Initial discovery: lists with backoff for up to [`DISCOVERY_WINDOW`].
    /// An attempt that stalls (a gateway that accepts and never answers) is
    /// abandoned after [`DISCOVERY_ATTEMPT`], or at the window's end, and
    /// counts as a failure like any other. A refusal other than admission
    /// being unavailable ends it early. The last real reason is kept.
    pub(crate) async fn discover(&self) {
        let started = Instant::now();
        let mut backoff = Duration::from_millis(200);
        loop {
            let left = DISCOVERY_WINDOW.saturating_sub(started.elapsed());
            let attempt = match tokio::time::timeout(left.min(DISCOVERY_ATTEMPT), self.refresh())
                .await
            {
                Ok(result) => result,
                Err(_) => {
                    // The stalled request is abandoned with its connection.
                    self.drop_connection().await;
                    Err(format!(
                        "discovery stalled: the gateway accepted but did not answer within {} s",
                        left.min(DISCOVERY_ATTEMPT).as_secs()
                    ))
                }
            };
            let Err(e) = attempt else { return };
            *self.last_error.write().await = e.clone();
            if started.elapsed() + backoff >= DISCOVERY_WINDOW
                || super::pre_forward(&e).is_some_and(|c| c != ErrorCode::FleetAdmissionUnavailable)
            {
                tracing::warn!(error = %e, "initial fleet discovery failed");
                return;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    pub(crate) async fn drop_connection(&self) {
        if let Some(c) = self.conn.lock().await.take() {
            let _ = c.cancel().await;
        }
    }

    /// Lists the gateway's tools; on success, remembers them and returns
    /// whether they differ from the previous verified list.
    pub(crate) async fn refresh(&self) -> Result<bool, String> {
        let result = self.refresh_inner().await;
        self.note_outcome(&result);
        result
    }

    pub(crate) async fn refresh_inner(&self) -> Result<bool, String> {
        let peer = self.peer().await?;
        let listed = tokio::time::timeout(REQUEST_BUDGET, list_with_settings(&peer)).await;
        let (tools, settings) = match listed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                let msg = e.to_string();
                // As for a call: a status the gateway answered leaves the
                // session to the requests in flight on it.
                if (matches!(e, rmcp::ServiceError::TransportClosed) || pre_forward(&msg).is_none())
                    && !super::refusal::answered_with_status(&e)
                {
                    self.drop_connection().await;
                }
                return Err(msg);
            }
            Err(_) => {
                self.drop_connection().await;
                return Err("tools/list timed out".into());
            }
        };
        Ok(self.keep(tools, settings).await)
    }

    /// Hands the relist task a listing a seat poll carried.
    pub(crate) fn carry(&self, listing: Listing) {
        *self.carried.lock() = Some(listing);
        self.relist.notify_one();
    }

    /// The catalog now: the listing a poll carried if there is one, else a
    /// fresh `tools/list`. Returns whether it differs from the last one.
    pub(crate) async fn renew(&self) -> Result<bool, String> {
        let carried = self.carried.lock().take();
        let Some(Listing(listing)) = carried else {
            return self.refresh().await;
        };
        match serde_json::from_value::<rmcp::model::ListToolsResult>(listing) {
            Ok(listed) => {
                let settings = listed
                    .meta
                    .as_ref()
                    .and_then(|m| CatalogSettings::read(&m.0));
                let changed = self.keep(listed.tools, settings).await;
                self.note_outcome::<()>(&Ok(()));
                tracing::debug!(changed, "took the listing a seat poll carried");
                Ok(changed)
            }
            Err(e) => {
                tracing::warn!(error = %e, "a carried listing is unreadable; listing again");
                self.refresh().await
            }
        }
    }

    /// Keeps a verified listing; returns whether it differs from the last.
    async fn keep(&self, mut tools: Vec<Tool>, settings: Option<CatalogSettings>) -> bool {
        // A family the settings switch off never stays in the catalog.
        if let Some(s) = settings {
            tools.retain(|t| s.keeps(&t.name));
        }
        *self.settings.write().await = settings;
        let mut cache = self.tools.write().await;
        let changed = cache.as_ref().map(|c| !same(c, &tools)).unwrap_or(true);
        *cache = Some(tools);
        self.last_error.write().await.clear();
        changed
    }

    /// A name for the catalog the bridge holds now: the hash of its tool
    /// definitions ("none" before any listing).
    pub(crate) async fn catalog_revision(&self) -> String {
        use std::hash::{Hash as _, Hasher as _};
        let tools = self.tools.read().await;
        let Some(tools) = tools.as_ref() else {
            return "none".into();
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        serde_json::to_string(tools)
            .unwrap_or_default()
            .hash(&mut h);
        format!("{:016x}", h.finish())
    }

    pub(crate) async fn notify_downstream(&self) {
        if let Some(peer) = self.echo.harness().await
            && let Err(e) = peer.notify_tool_list_changed().await
        {
            tracing::debug!(error = %e, "list_changed not delivered to the harness");
        }
    }
}

pub(crate) fn same(a: &[Tool], b: &[Tool]) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

pub(crate) fn hint(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::FleetAdmissionUnavailable | ErrorCode::ServiceUnavailable => {
            "retry shortly; if it persists, ask the lead to inspect admission"
        }
        ErrorCode::TooManyConnections => {
            "nothing ran; retry once fewer of this pane's calls are in flight"
        }
        _ => "ask the lead for fleet admission",
    }
}

/// The pane this process runs in, as the multiplexer told it.
pub(crate) fn pane_id() -> Option<String> {
    std::env::var("TMUX_PANE")
        .ok()
        .or_else(|| std::env::var("HERDR_PANE_ID").ok())
        .filter(|p| !p.is_empty())
}

/// A small HTTP/1.1 client on the gateway's local socket, keeping its
/// connection (and so its proof) between requests.
pub(crate) struct Http {
    pub(crate) socket: String,
    pub(crate) sender: Option<Sender>,
}

impl Http {
    pub(crate) fn new(socket: String) -> Self {
        Http {
            socket,
            sender: None,
        }
    }

    pub(crate) async fn connect(&mut self) -> Result<&mut Sender, String> {
        if self.sender.as_ref().is_some_and(|s| !s.is_closed()) {
            return self.sender.as_mut().ok_or_else(|| "no connection".into());
        }
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|e| format!("cannot reach the gateway: {e}"))?;
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(self.sender.insert(sender))
    }

    /// One request; returns the status and the JSON body.
    pub(crate) async fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        let sender = self.connect().await?;
        sender.ready().await.map_err(|e| e.to_string())?;
        let bytes = body.map(|b| b.to_string()).unwrap_or_default();
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, "localhost")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| e.to_string())?;
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => {
                self.sender = None;
                return Err(e.to_string());
            }
        };
        let status = resp.status().as_u16();
        let collected = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((
            status,
            serde_json::from_slice(&collected).unwrap_or(Value::Null),
        ))
    }
}

/// One seat-route request on a fresh connection, as a tool's answer: the
/// JSON body of a 200, else the gateway's refusal body, else a refusal
/// that says what was not done (`nothing`: "nothing was sent", ...).
pub(crate) async fn seat_answer(
    socket: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
    nothing: &str,
) -> Result<Value, Value> {
    let refused = |code: ErrorCode, message: String| serde_json::json!({ "error": { "code": code.as_str(), "message": message } });
    match Http::new(socket.to_string()).call(method, path, body).await {
        Ok((200, v)) => Ok(v),
        Ok((_, v)) if v.get("error").is_some() => Err(v),
        Ok((status, v)) => Err(refused(
            ErrorCode::ServiceUnavailable,
            format!("HTTP {status}: {v}"),
        )),
        Err(e) => Err(refused(
            ErrorCode::FleetAdmissionUnavailable,
            format!("the gateway is unreachable ({e}); {nothing}"),
        )),
    }
}

pub(crate) fn encode(pane: &str) -> String {
    pane.replace('%', "%25")
}
