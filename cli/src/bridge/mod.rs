//! `clankie mcp --fleet`: the stdio MCP server a worker pane registers in its
//! harness. It proxies `tools/list` and `tools/call` to the gateway.
//!
//! - Discovery retries with backoff for up to 20 s while a pane settles,
//!   abandoning and retrying an attempt that stalls; the last verified
//!   catalog is kept through temporary failures.
//! - Every `clankie_call` dispatch gets its receipt id here, before it is
//!   forwarded, so a lost reply can be reconciled by that id.
//! - Only a refusal that says nothing was forwarded (`retryable`: admission
//!   unavailable, a connection turned away) is retried, once, after the
//!   wait the gateway names, and only within the request's one 30 s budget;
//!   anything else after forwarding is reported as uncertain with its
//!   receipt id, never repeated.
//! - When the gateway says the tool list changed, the bridge lists again and
//!   tells its harness only if the definitions really changed.
//! - A definite non-member refusal (`local_process_membership_required`)
//!   makes automatic relisting go quiet: no request is sent on its own
//!   until the harness itself asks again and is admitted.

use clankie_types::fleet::{FleetTool, Outcome, ReceiptId, ReceiptKind, meta};
use std::process::ExitCode;
use std::sync::Arc;

use std::time::Duration;
use tracing::Instrument as _;

use anyhow::{Context, bail};
use clankie_runtime::ErrorCode;
use clankie_runtime::paths::StatePaths;
use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::{Mutex, Notify, RwLock};

mod catalog;
pub(crate) mod channel;
mod codex;
mod echo;
mod era;
pub(crate) mod gateway;
mod grant;
mod presence;
mod refusal;
mod report;
pub(crate) mod submit;

use gateway::*;

use crate::support::discovery;

#[derive(Args)]
pub struct McpArgs {
    /// Serve the fleet bridge (clankie_tools and clankie_call).
    #[arg(long, conflicts_with = "grant")]
    pub fleet: bool,
    /// Serve one manual grant's tools directly, from its private file.
    #[arg(long)]
    pub grant: Option<std::path::PathBuf>,
    /// The gateway's MCP URL (default: from the discovery file).
    #[arg(long, env = "CLANKIE_FLEET_URL")]
    pub url: Option<String>,
    /// The fleet bearer token.
    #[arg(long, env = "CLANKIE_FLEET_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Leave the seat's deliveries alone: the harness reads them itself
    /// (the Pi worker extension does).
    #[arg(long, env = "CLANKIE_FLEET_NO_CHANNEL")]
    pub no_channel: bool,
}

/// The gateway's MCP endpoint from what the owner gave: the base URL
/// (`http://host:port`) means its `/mcp`; a URL on another path is refused,
/// naming the one to use.
fn mcp_url(given: &str) -> anyhow::Result<String> {
    let mut url = url::Url::parse(given.trim()).map_err(|e| {
        anyhow::anyhow!(
            "{given} is not a URL ({e}); the gateway's is like http://127.0.0.1:7755/mcp"
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("{given} is not an http(s) URL; the gateway's is like http://127.0.0.1:7755/mcp");
    }
    match url.path() {
        "" | "/" => url.set_path("/mcp"),
        p if p.trim_end_matches('/').ends_with("/mcp") => {}
        _ => {
            let mut fixed = url.clone();
            fixed.set_path("/mcp");
            fixed.set_query(None);
            bail!("{given} is not the gateway's MCP endpoint; use {fixed}");
        }
    }
    Ok(url.to_string())
}

#[derive(Clone)]
struct FleetServer {
    up: Arc<Gateway>,
    /// This bridge pushes the seat's deliveries (`claude/channel`): only
    /// session eras carry them, so it offers no stateless era.
    channel: bool,
}

/// Every answer to a dispatch names the receipt id the bridge chose for it,
/// so the caller can always reconcile, whatever the gateway said.
fn keep_receipt(mut result: CallToolResult, receipt_id: Option<&str>) -> CallToolResult {
    let Some(id) = receipt_id else {
        return result;
    };
    // A passed-through answer names its receipt in `_meta` already.
    if result
        .meta
        .as_ref()
        .is_some_and(|m| m.contains_key(meta::RECEIPT))
    {
        return result;
    }
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

/// Harnesses drop a result's `_meta`, where a passed-through answer names
/// its receipt, and show the model either its content blocks (Codex) or,
/// when it has one, its structured content (Claude Code). So a
/// `clankie_call` answer keeps the upstream's blocks as they were and gains
/// one trailing text block with its receipt and outcome (and the detail of
/// an uncertain one), and an object of structured content gains the same
/// under `clankie/receipt` (`clankie_call` declares no output schema, so
/// no harness holds the upstream's object to one).
fn receipt_block(mut result: CallToolResult) -> CallToolResult {
    let from_meta = |key: &str| {
        result
            .meta
            .as_ref()
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let body = result.structured_content.as_ref();
    let field = |key: &str| {
        body.and_then(|b| b.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let Some(receipt) = from_meta(meta::RECEIPT).or_else(|| field("receiptId")) else {
        return result;
    };
    let shown = result
        .content
        .iter()
        .any(|c| c.as_text().is_some_and(|t| t.text.contains(&receipt)));
    let mut note = serde_json::Map::new();
    note.insert("receiptId".into(), json!(receipt));
    if let Some(outcome) = from_meta(meta::OUTCOME).or_else(|| field("outcome")) {
        note.insert("outcome".into(), json!(outcome));
    }
    if let Some(detail) = from_meta(meta::DETAIL).or_else(|| field("detail")) {
        note.insert("detail".into(), json!(detail));
    }
    let note = Value::Object(note);
    if let Some(Value::Object(body)) = result.structured_content.as_mut()
        && !body.contains_key("receiptId")
    {
        body.insert("clankie/receipt".into(), note.clone());
    }
    if !shown {
        result.content.push(rmcp::model::ContentBlock::text(format!(
            "clankie_call receipt {note}"
        )));
    }
    result
}

fn refusal_result(code: ErrorCode, message: String) -> CallToolResult {
    CallToolResult::structured_error(json!({
        "error": { "code": code.as_str(), "message": message }
    }))
}

impl FleetServer {
    async fn forward(&self, params: CallToolRequestParams) -> CallToolResult {
        // The bridge itself reads the change a seat submits for review.
        if FleetTool::parse(&params.name) == Some(FleetTool::Submit) {
            let args = Value::Object(params.arguments.clone().unwrap_or_default());
            let (Route::Local { socket }, Some(pane)) = (&self.up.route, pane_id()) else {
                return refusal_result(
                    ErrorCode::NativeSeatRequired,
                    "submit_for_review needs a seat in a linked pane".into(),
                );
            };
            return match submit::submit(socket, &pane, &args).await {
                Ok(v) => CallToolResult::structured(v),
                Err(v) => CallToolResult::structured_error(v),
            };
        }
        // A report's receipt id the model gives asks where that report
        // stands: on a seat, it is looked up and never sent again.
        if FleetTool::parse(&params.name) == Some(FleetTool::Report)
            && let (Route::Local { socket }, Some(pane)) = (&self.up.route, pane_id())
            && let Some(id) = params
                .arguments
                .as_ref()
                .and_then(|a| a.get("receiptId"))
                .and_then(Value::as_str)
        {
            return match report::look_up(socket, &pane, id).await {
                Ok(v) => CallToolResult::structured(v),
                Err(v) => CallToolResult::structured_error(v),
            };
        }
        // A dispatch gets its receipt id here, before anything is sent.
        let mut params = params;
        let mut receipt_id = None;
        let tool = FleetTool::parse(&params.name);
        let kind = tool
            .and_then(FleetTool::receipt_kind)
            .filter(|k| *k != ReceiptKind::Call);
        if let Some(kind) = kind {
            let args = params.arguments.get_or_insert_with(Default::default);
            let id = match args.get("receiptId").and_then(Value::as_str) {
                Some(id) => id.to_string(),
                None => {
                    let id = ReceiptId::mint(kind).into_string();
                    args.insert("receiptId".into(), json!(id));
                    id
                }
            };
            receipt_id = Some(id);
        }
        if tool == Some(FleetTool::Call) {
            let args = params.arguments.get_or_insert_with(Default::default);
            if args.contains_key("name") {
                let id = match args.get("receiptId").and_then(Value::as_str) {
                    Some(id) => id.to_string(),
                    None => {
                        let id = ReceiptId::mint(ReceiptKind::Call).into_string();
                        args.insert("receiptId".into(), json!(id));
                        id
                    }
                };
                receipt_id = Some(id);
            }
        }
        // The budget is the whole request's, across its one retry.
        let deadline = tokio::time::Instant::now() + REQUEST_BUDGET;
        let mut retried = false;
        loop {
            let peer = match self.up.peer().await {
                Ok(p) => p,
                Err(e) => {
                    // Nothing was sent: the connection itself failed, or the
                    // gateway refused it before any tool was reached.
                    if let Some(code) = pre_forward(&e) {
                        if let Some(wait) = retry_wait(&e, &mut retried, deadline) {
                            tokio::time::sleep(wait).await;
                            continue;
                        }
                        self.up.note_outcome::<()>(&Err(e.clone()));
                        return keep_receipt(
                            refusal_result(code, format!("{e}; {}", hint(code))),
                            receipt_id.as_deref(),
                        );
                    }
                    return keep_receipt(unreachable(&e), receipt_id.as_deref());
                }
            };
            let answer = self
                .up
                .echo
                .call(
                    &peer,
                    params.clone(),
                    deadline.saturating_duration_since(tokio::time::Instant::now()),
                )
                .await;
            // Whether the gateway answered this request with a status: then
            // the connection is alive and the failure is this request's.
            let answered = answer
                .as_ref()
                .err()
                .is_some_and(|e| refusal::answered_with_status(e));
            let err = match answer {
                Ok(result) => {
                    self.up.note_outcome::<()>(&Ok(()));
                    return keep_receipt(result, receipt_id.as_deref());
                }
                Err(rmcp::ServiceError::Timeout { .. }) => "no reply within 30 s".to_string(),
                // The gateway answered, with a JSON-RPC error: the request
                // was refused as a whole before any tool ran, so it is a
                // refusal, never "may have applied".
                Err(rmcp::ServiceError::McpError(e)) => {
                    self.up.note_outcome::<()>(&Ok(()));
                    let code = e
                        .data
                        .as_ref()
                        .and_then(|d| d["code"].as_str())
                        .and_then(ErrorCode::parse)
                        .unwrap_or(ErrorCode::MalformedRequest);
                    return keep_receipt(
                        refusal_result(
                            code,
                            format!(
                                "refused before any tool ran ({}: {}); nothing was dispatched",
                                e.code.0, e.message
                            ),
                        ),
                        receipt_id.as_deref(),
                    );
                }
                Err(e) if refusal::never_sent(&e) => {
                    self.up.drop_connection().await;
                    return keep_receipt(unreachable(&e), receipt_id.as_deref());
                }
                Err(e) => refusal::status_refusal(&e).unwrap_or_else(|| e.to_string()),
            };
            if let Some(code) = pre_forward(&err) {
                if let Some(wait) = retry_wait(&err, &mut retried, deadline) {
                    tokio::time::sleep(wait).await;
                    continue;
                }
                self.up.note_outcome::<()>(&Err(err.clone()));
                return keep_receipt(
                    refusal_result(code, format!("{err}; {}", hint(code))),
                    receipt_id.as_deref(),
                );
            }
            // A failure the gateway answered is this request's alone: the
            // others in flight on the session keep it (one 429 once answered
            // 62 concurrent calls "uncertain"). Any other failure (a reset,
            // a timeout, a closed stream) may mean the connection is gone,
            // so the next request starts a new session.
            if !answered {
                self.up.drop_connection().await;
            }
            return match receipt_id {
                Some(id) => CallToolResult::structured(json!({
                    "receiptId": id,
                    "outcome": Outcome::Uncertain,
                    "detail": format!(
                        "the reply was lost ({err}); the call may have applied: reconcile with clankie_call({{\"receiptId\": \"{id}\"}}), never repeat it"
                    ),
                })),
                None => refusal_result(ErrorCode::ServiceUnavailable, err),
            };
        }
    }
}

/// The refusal for a request that never reached the gateway.
fn unreachable(e: &dyn std::fmt::Display) -> CallToolResult {
    refusal_result(
        ErrorCode::FleetAdmissionUnavailable,
        format!("the gateway is unreachable ({e}); nothing was forwarded, retry shortly"),
    )
}

/// The wait before the one retry a refusal earns: only one that says
/// nothing was forwarded, after the wait the gateway named, and only while
/// that wait still fits in the request's budget.
fn retry_wait(err: &str, retried: &mut bool, deadline: tokio::time::Instant) -> Option<Duration> {
    if *retried {
        return None;
    }
    let wait = refusal::retry_after(err)?;
    if tokio::time::Instant::now() + wait >= deadline {
        return None;
    }
    *retried = true;
    Some(wait)
}

impl ServerHandler for FleetServer {
    /// Every era through 2025-11-25; 2026-07-28 (stateless) too, unless the
    /// bridge carries the seat channel: a notification pushed into a
    /// session exists only where there is a session, and Claude Code
    /// registers channels only on a session era.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.channel {
            std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        } else {
            std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    /// A channel-carrying bridge answers `server/discover` as a session-era
    /// server does (method not found), so the harness falls back to
    /// `initialize`.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, ErrorData> {
        let _ = context;
        if self.channel {
            return Err(ErrorData::method_not_found::<
                rmcp::model::DiscoverRequestMethod,
            >());
        }
        Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    #[allow(deprecated, reason = "MCP logging is still what harnesses set")]
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
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
        self.up.echo.mark_listed();
        // The harness asking is never automatic: it may try even when quiet.
        if (self.up.tools.read().await.is_none() || self.up.is_quiet())
            && let Err(e) = self.up.refresh().await
        {
            *self.up.last_error.write().await = e;
        }
        // A verified list outlives any later failure, an admission refusal
        // included: the schemas do not change because a list failed.
        match self.up.tools.read().await.clone() {
            Some(tools) => {
                // The settings the gateway served it under go on to the
                // harness.
                let mut listed = ListToolsResult::with_all_items(tools);
                if let Some(s) = *self.up.settings.read().await {
                    let mut meta = serde_json::Map::new();
                    s.write(&mut meta);
                    listed.meta = Some(rmcp::model::MetaObject(meta));
                }
                Ok(listed)
            }
            None if self.up.is_quiet() => Err(ErrorData::invalid_request(
                format!(
                    "{}: this process is not admitted to the fleet; {}",
                    NOT_MEMBER.as_str(),
                    hint(NOT_MEMBER)
                ),
                None,
            )),
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
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The harness's `_meta` travels on, less its own session's protocol
        // keys: a progress token comes back with the gateway's steps under
        // the same token.
        // One span per call, parented on the harness's own context when it
        // sent one; the gateway hears this span as the parent.
        let span =
            tracing::info_span!("bridge.tools_call", tool = %request.name, otel.kind = "server");
        clankie_runtime::telemetry::adopt_meta_parent(&span, &context.meta);
        let mut meta = era::forwardable(&context.meta);
        clankie_runtime::telemetry::inject_meta(&span, &mut meta);
        request.meta = (!meta.0.0.is_empty()).then_some(meta);
        let call = FleetTool::parse(&request.name) == Some(FleetTool::Call);
        let result = self.forward(request).instrument(span).await;
        let result = if call { receipt_block(result) } else { result };
        Ok(era::complete(result).into())
    }

    #[allow(deprecated, reason = "MCP logging is still what harnesses set")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.up
            .echo
            .set_level(request.level, self.up.peer().await)
            .await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.up.echo.attach(context.peer).await;
    }
}

pub async fn run(paths: StatePaths, args: McpArgs) -> anyhow::Result<ExitCode> {
    if let Some(file) = args.grant {
        return grant::run(file).await;
    }
    if !args.fleet {
        bail!("choose a mode: `clankie mcp --fleet` or `clankie mcp --grant FILE`");
    }
    clankie_runtime::telemetry::init("fleet-bridge");
    // With a token: the remote route. Without: the local socket, where the
    // kernel proves this process runs in a linked pane.
    let route = match args.token.filter(|t| !t.trim().is_empty()) {
        Some(token) => Route::Bearer {
            url: match args.url {
                Some(u) => mcp_url(&u)?,
                None => discovery::read(&paths)?.mcp,
            },
            token,
        },
        None => Route::Local {
            socket: discovery::local_socket(&paths)?,
        },
    };
    let up = Arc::new(Gateway {
        route,
        conn: Mutex::new(None),
        tools: RwLock::new(None),
        settings: RwLock::new(None),
        last_error: RwLock::new(String::new()),
        relist: Arc::new(Notify::new()),
        carried: Default::default(),
        echo: Default::default(),
        quiet: std::sync::atomic::AtomicBool::new(false),
    });
    up.discover().await;
    // Relist on every upstream change; tell the harness only on a real change.
    {
        let up = up.clone();
        let codex = codex::CodexThreads::from_env();
        tokio::spawn(async move {
            loop {
                up.relist.notified().await;
                if up.is_quiet() {
                    continue;
                }
                match up.renew().await {
                    Ok(true) => {
                        up.notify_downstream().await;
                        // Codex refreshes only when its registration changes.
                        if let Some(codex) = &codex {
                            codex.refresh(&up.catalog_revision().await).await;
                        }
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "fleet relist failed; keeping the last catalog")
                    }
                }
            }
        });
    }
    // The seat channel: only a pane's local route has a seat. Without it,
    // the catalog alone is watched.
    let mut channel = false;
    if let Route::Local { socket } = &up.route
        && let Some(pane) = pane_id()
    {
        if presence::herdr_pane_missing().await {
            tracing::warn!(
                "herdr says this bridge's pane does not exist: the worker stays unclaimed (no seat channel)"
            );
        } else if args.no_channel {
            tokio::spawn(catalog::run(up.clone(), socket.clone(), pane));
        } else {
            tokio::spawn(channel::run(up.clone(), socket.clone(), pane));
            channel = true;
        }
    }
    let server = FleetServer {
        up: up.clone(),
        channel,
    }
    .serve(rmcp::transport::stdio())
    .await
    .context("serving MCP on stdio")?;
    let _ = server.waiting().await;
    up.drop_connection().await;
    clankie_runtime::telemetry::shutdown();
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod url_tests {
    use super::mcp_url;

    #[test]
    fn a_base_url_means_its_mcp_endpoint_and_another_path_names_the_right_one() {
        assert_eq!(
            mcp_url("http://127.0.0.1:7755").expect("base"),
            "http://127.0.0.1:7755/mcp"
        );
        assert_eq!(
            mcp_url("http://127.0.0.1:7755/").expect("base"),
            "http://127.0.0.1:7755/mcp"
        );
        assert_eq!(mcp_url("http://h:1/mcp").expect("as is"), "http://h:1/mcp");
        let wrong = mcp_url("http://h:1/v1/api?x=1")
            .expect_err("another path")
            .to_string();
        assert!(wrong.contains("use http://h:1/mcp"), "{wrong}");
        assert!(mcp_url("h:1").is_err());
        assert!(
            mcp_url("ftp://h/mcp")
                .expect_err("scheme")
                .to_string()
                .contains("http(s)")
        );
    }
}
