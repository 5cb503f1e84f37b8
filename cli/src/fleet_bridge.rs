//! `clankie mcp --fleet`: the stdio MCP server a worker pane registers in its
//! harness. It proxies `tools/list` and `tools/call` to the gateway.
//!
//! - Discovery retries with backoff for up to 20 s while a pane settles; the
//!   last verified catalog is kept through temporary failures.
//! - Every `clankie_call` dispatch gets its receipt id here, before it is
//!   forwarded, so a lost reply can be reconciled by that id.
//! - Only an explicit pre-forward refusal (`fleet_admission_unavailable`) is
//!   retried, once; anything else after forwarding is reported as uncertain
//!   with its receipt id, never repeated.
//! - When the gateway says the tool list changed, the bridge lists again and
//!   tells its harness only if the definitions really changed.
//! - A definite non-member refusal (`local_process_membership_required`)
//!   makes automatic relisting go quiet: no request is sent on its own
//!   until the harness itself asks again and is admitted.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clankie_runtime::paths::StatePaths;
use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{
    NotificationContext, Peer, RequestContext, RoleClient, RoleServer, RunningService,
};
use rmcp::{ClientHandler, ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{Mutex, Notify, RwLock};

/// How long initial discovery keeps trying.
const DISCOVERY_WINDOW: Duration = Duration::from_secs(20);
/// The total budget of one forwarded request.
const REQUEST_BUDGET: Duration = Duration::from_secs(30);

/// Reasons that mean nothing was forwarded.
const PRE_FORWARD: &[&str] = &[
    "fleet_credential_required",
    "fleet_credential_invalid",
    "fleet_admission_unavailable",
    "fleet_admission_revoked",
    "local_process_membership_required",
    "payload_too_large",
];

#[derive(Args)]
pub struct McpArgs {
    /// Serve the fleet bridge (clankie_tools and clankie_call).
    #[arg(long)]
    pub fleet: bool,
    /// The gateway's MCP URL (default: from the discovery file).
    #[arg(long, env = "CLANKIE_FLEET_URL")]
    pub url: Option<String>,
    /// The fleet bearer token.
    #[arg(long, env = "CLANKIE_FLEET_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

struct UpstreamHandler {
    relist: Arc<Notify>,
}

impl ClientHandler for UpstreamHandler {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info.client_info.name = "clankie-fleet-bridge".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relist.notify_one();
    }
}

/// Where the gateway is reached.
enum Route {
    /// Streamable HTTP with a fleet bearer (remote links).
    Bearer { url: String, token: String },
    /// The gateway's local Unix socket: no token, the kernel proves the pane.
    Local { socket: String },
}

pub(crate) struct Upstream {
    route: Route,
    conn: Mutex<Option<RunningService<RoleClient, UpstreamHandler>>>,
    /// The last verified tool list.
    tools: RwLock<Option<Vec<Tool>>>,
    last_error: RwLock<String>,
    pub(crate) relist: Arc<Notify>,
    pub(crate) downstream: Mutex<Option<Peer<RoleServer>>>,
    /// Set by a definite non-member refusal; automatic requests stop.
    quiet: std::sync::atomic::AtomicBool,
}

/// The refusal that silences automatic requests.
const NOT_MEMBER: &str = "local_process_membership_required";

impl Upstream {
    /// Remembers whether the gateway last called this process a non-member.
    pub(crate) fn note_outcome<T>(&self, result: &Result<T, String>) {
        use std::sync::atomic::Ordering;
        match result {
            Err(e) if e.contains(NOT_MEMBER) => {
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

    async fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let mut conn = self.conn.lock().await;
        if let Some(c) = conn.as_ref()
            && !c.is_closed()
        {
            return Ok(c.peer().clone());
        }
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let handler = UpstreamHandler {
            relist: self.relist.clone(),
        };
        let started = match &self.route {
            Route::Bearer { url, token } => {
                let cfg = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .auth_header(token.clone())
                    .reinit_on_expired_session(true);
                let transport = StreamableHttpClientTransport::from_config(cfg);
                tokio::time::timeout(Duration::from_secs(10), handler.serve(transport)).await
            }
            Route::Local { socket } => {
                let cfg = StreamableHttpClientTransportConfig::with_uri("http://localhost/mcp")
                    .reinit_on_expired_session(true);
                let transport =
                    StreamableHttpClientTransport::from_unix_socket_with_config(socket, cfg);
                tokio::time::timeout(Duration::from_secs(10), handler.serve(transport)).await
            }
        };
        let running = started
            .map_err(|_| "the gateway did not answer initialize in 10 s".to_string())?
            .map_err(|e| e.to_string())?;
        let peer = running.peer().clone();
        *conn = Some(running);
        Ok(peer)
    }

    async fn drop_connection(&self) {
        if let Some(c) = self.conn.lock().await.take() {
            let _ = c.cancel().await;
        }
    }

    /// Lists the gateway's tools; on success, remembers them and returns
    /// whether they differ from the previous verified list.
    async fn refresh(&self) -> Result<bool, String> {
        let result = self.refresh_inner().await;
        self.note_outcome(&result);
        result
    }

    async fn refresh_inner(&self) -> Result<bool, String> {
        let peer = self.peer().await?;
        let listed = tokio::time::timeout(REQUEST_BUDGET, peer.list_all_tools()).await;
        let tools = match listed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                let msg = e.to_string();
                if matches!(e, rmcp::ServiceError::TransportClosed) || !is_refusal(&msg) {
                    self.drop_connection().await;
                }
                return Err(msg);
            }
            Err(_) => {
                self.drop_connection().await;
                return Err("tools/list timed out".into());
            }
        };
        let mut cache = self.tools.write().await;
        let changed = cache.as_ref().map(|c| !same(c, &tools)).unwrap_or(true);
        *cache = Some(tools);
        self.last_error.write().await.clear();
        Ok(changed)
    }

    async fn notify_downstream(&self) {
        if let Some(peer) = self.downstream.lock().await.clone()
            && let Err(e) = peer.notify_tool_list_changed().await
        {
            tracing::debug!(error = %e, "list_changed not delivered to the harness");
        }
    }
}

fn same(a: &[Tool], b: &[Tool]) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

fn hint(code: &str) -> &'static str {
    if code == "fleet_admission_unavailable" {
        "retry shortly; if it persists, ask the lead to inspect admission"
    } else {
        "ask the lead for fleet admission"
    }
}

fn is_refusal(msg: &str) -> bool {
    PRE_FORWARD.iter().any(|r| msg.contains(r))
}

#[derive(Clone)]
struct FleetServer {
    up: Arc<Upstream>,
}

/// Every answer to a dispatch names the receipt id the bridge chose for it,
/// so the caller can always reconcile, whatever the gateway said.
fn keep_receipt(mut result: CallToolResult, receipt_id: Option<&str>) -> CallToolResult {
    let Some(id) = receipt_id else {
        return result;
    };
    let mut body = match result.structured_content.take() {
        Some(Value::Object(body)) if body.contains_key("receiptId") => {
            result.structured_content = Some(Value::Object(body));
            return result;
        }
        Some(Value::Object(body)) => body,
        Some(other) => {
            result.structured_content = Some(other);
            return result;
        }
        None => {
            result.structured_content = Some(json!({ "receiptId": id }));
            return result;
        }
    };
    body.insert("receiptId".into(), json!(id));
    // The text copy is rebuilt from the same body, so both say the same.
    if result.is_error == Some(true) {
        CallToolResult::structured_error(Value::Object(body))
    } else {
        CallToolResult::structured(Value::Object(body))
    }
}

fn refusal_result(code: &str, message: String) -> CallToolResult {
    CallToolResult::structured_error(json!({
        "error": { "code": code, "message": message }
    }))
}

impl FleetServer {
    async fn forward(&self, params: CallToolRequestParams) -> CallToolResult {
        // The bridge itself reads the change a seat submits for review.
        if params.name == "submit_for_review" {
            let args = Value::Object(params.arguments.clone().unwrap_or_default());
            let (Route::Local { socket }, Some(pane)) = (&self.up.route, pane_id()) else {
                return refusal_result(
                    "native_seat_required",
                    "submit_for_review needs a seat in a linked pane".into(),
                );
            };
            return match crate::review::submit(socket, &pane, &args).await {
                Ok(v) => CallToolResult::structured(v),
                Err(v) => CallToolResult::structured_error(v),
            };
        }
        // A dispatch gets its receipt id here, before anything is sent.
        let mut params = params;
        let mut receipt_id = None;
        if params.name == "message_clankie" || params.name == "message_peer" {
            let args = params.arguments.get_or_insert_with(Default::default);
            let id = match args.get("receiptId").and_then(Value::as_str) {
                Some(id) => id.to_string(),
                None => {
                    let id = format!("rpt_{}", uuid::Uuid::new_v4().simple());
                    args.insert("receiptId".into(), json!(id));
                    id
                }
            };
            receipt_id = Some(id);
        }
        if params.name == "clankie_call" {
            let args = params.arguments.get_or_insert_with(Default::default);
            if args.contains_key("name") {
                let id = match args.get("receiptId").and_then(Value::as_str) {
                    Some(id) => id.to_string(),
                    None => {
                        let id = format!("rcpt_{}", uuid::Uuid::new_v4().simple());
                        args.insert("receiptId".into(), json!(id));
                        id
                    }
                };
                receipt_id = Some(id);
            }
        }
        let mut retried = false;
        loop {
            let peer = match self.up.peer().await {
                Ok(p) => p,
                Err(e) => {
                    // Nothing was sent: the connection itself failed, or the
                    // gateway refused it before any tool was reached.
                    if let Some(code) = PRE_FORWARD.iter().find(|r| e.contains(**r)) {
                        if *code == "fleet_admission_unavailable" && !retried {
                            retried = true;
                            tokio::time::sleep(Duration::from_millis(500)).await;
                            continue;
                        }
                        self.up.note_outcome::<()>(&Err(e.clone()));
                        return keep_receipt(
                            refusal_result(code, format!("{e}; {}", hint(code))),
                            receipt_id.as_deref(),
                        );
                    }
                    return keep_receipt(
                        refusal_result(
                            "fleet_admission_unavailable",
                            format!(
                                "the gateway is unreachable ({e}); nothing was forwarded, retry shortly"
                            ),
                        ),
                        receipt_id.as_deref(),
                    );
                }
            };
            let answer = tokio::time::timeout(REQUEST_BUDGET, peer.call_tool(params.clone())).await;
            let err = match answer {
                Ok(Ok(result)) => {
                    self.up.note_outcome::<()>(&Ok(()));
                    return keep_receipt(result, receipt_id.as_deref());
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no reply within 30 s".to_string(),
            };
            if err.contains("fleet_admission_unavailable") && !retried {
                retried = true;
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            if let Some(code) = PRE_FORWARD.iter().find(|r| err.contains(**r)) {
                self.up.note_outcome::<()>(&Err(err.clone()));
                return keep_receipt(
                    refusal_result(code, format!("{err}; {}", hint(code))),
                    receipt_id.as_deref(),
                );
            }
            self.up.drop_connection().await;
            return match receipt_id {
                Some(id) => CallToolResult::structured(json!({
                    "receiptId": id,
                    "outcome": "uncertain",
                    "detail": format!(
                        "the reply was lost ({err}); the call may have applied: reconcile with clankie_call({{\"receiptId\": \"{id}\"}}), never repeat it"
                    ),
                })),
                None => refusal_result("service_unavailable", err),
            };
        }
    }
}

impl ServerHandler for FleetServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        // Deliveries arrive as Claude Code's channel notification.
        capabilities.experimental = Some(
            [("claude/channel".to_string(), serde_json::Map::new())]
                .into_iter()
                .collect(),
        );
        let mut info = ServerConfig::new(capabilities);
        let mut implementation = Implementation::from_build_env();
        implementation.name = "clankie-fleet".into();
        implementation.version = env!("CARGO_PKG_VERSION").into();
        info.server_info = implementation;
        info.instructions = Some(
            "Clankie's connected MCP accounts: search with clankie_tools, then call with clankie_call. \
             An uncertain result may have applied: reconcile it by receiptId, never repeat it."
                .into(),
        );
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // The harness asking is never automatic: it may try even when quiet.
        if (self.up.tools.read().await.is_none() || self.up.is_quiet())
            && let Err(e) = self.up.refresh().await
        {
            *self.up.last_error.write().await = e;
        }
        if self.up.is_quiet() {
            return Err(ErrorData::invalid_request(
                format!(
                    "{NOT_MEMBER}: this process is not admitted to the fleet; {}",
                    hint(NOT_MEMBER)
                ),
                None,
            ));
        }
        match self.up.tools.read().await.clone() {
            Some(tools) => serde_json::from_value(json!({ "tools": tools }))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
            None => Err(ErrorData::internal_error(
                format!(
                    "the fleet catalog is not available: {}",
                    self.up.last_error.read().await
                ),
                None,
            )),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.forward(request).await.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        *self.up.downstream.lock().await = Some(context.peer);
    }
}

/// One entry of the gateway's discovery file. A hire is told where the
/// file is (`CLANKIE_GATEWAY_DISCOVERY`), never where the state folder is;
/// `CLANKIE_MCP_SOCKET` names the local socket outright.
pub(crate) fn discovery(paths: &StatePaths, key: &str) -> anyhow::Result<String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if key == "unix"
        && let Some(socket) = env("CLANKIE_MCP_SOCKET")
    {
        return Ok(socket);
    }
    let file = env("CLANKIE_GATEWAY_DISCOVERY")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| paths.gateway_discovery());
    let bytes = std::fs::read(&file).with_context(|| {
        format!(
            "no gateway discovery file at {}; pass --url or set CLANKIE_FLEET_URL",
            file.display()
        )
    })?;
    let v: Value =
        serde_json::from_slice(&bytes).context("the gateway discovery file is unreadable")?;
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .with_context(|| format!("the gateway discovery file names no {key}"))
}

/// The pane this process runs in, as the multiplexer told it.
fn pane_id() -> Option<String> {
    std::env::var("TMUX_PANE")
        .ok()
        .or_else(|| std::env::var("HERDR_PANE_ID").ok())
        .filter(|p| !p.is_empty())
}

pub async fn run(paths: StatePaths, args: McpArgs) -> anyhow::Result<ExitCode> {
    if !args.fleet {
        bail!("choose a mode: `clankie mcp --fleet`");
    }
    clankie_runtime::telemetry::init("fleet-bridge");
    // With a token: the remote route. Without: the local socket, where the
    // kernel proves this process runs in a linked pane.
    let route = match args.token.filter(|t| !t.trim().is_empty()) {
        Some(token) => Route::Bearer {
            url: match args.url {
                Some(u) => u,
                None => discovery(&paths, "mcp")?,
            },
            token,
        },
        None => Route::Local {
            socket: discovery(&paths, "unix")?,
        },
    };
    let up = Arc::new(Upstream {
        route,
        conn: Mutex::new(None),
        tools: RwLock::new(None),
        last_error: RwLock::new(String::new()),
        relist: Arc::new(Notify::new()),
        downstream: Mutex::new(None),
        quiet: std::sync::atomic::AtomicBool::new(false),
    });
    // Initial discovery, with backoff, for up to 20 s.
    let started = Instant::now();
    let mut backoff = Duration::from_millis(200);
    loop {
        match up.refresh().await {
            Ok(_) => break,
            Err(e) => {
                *up.last_error.write().await = e.clone();
                if started.elapsed() + backoff > DISCOVERY_WINDOW
                    || is_refusal(&e) && !e.contains("unavailable")
                {
                    tracing::warn!(error = %e, "initial fleet discovery failed");
                    break;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
    // Relist on every upstream change; tell the harness only on a real change.
    {
        let up = up.clone();
        tokio::spawn(async move {
            loop {
                up.relist.notified().await;
                if up.is_quiet() {
                    continue;
                }
                match up.refresh().await {
                    Ok(true) => up.notify_downstream().await,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "fleet relist failed; keeping the last catalog")
                    }
                }
            }
        });
    }
    // The seat channel: only a pane's local route has a seat.
    if let Route::Local { socket } = &up.route
        && let Some(pane) = pane_id()
    {
        tokio::spawn(crate::seat_channel::run(up.clone(), socket.clone(), pane));
    }
    let server = FleetServer { up: up.clone() }
        .serve(rmcp::transport::stdio())
        .await
        .context("serving MCP on stdio")?;
    let _ = server.waiting().await;
    up.drop_connection().await;
    Ok(ExitCode::SUCCESS)
}
