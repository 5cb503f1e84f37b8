//! `clankie mcp --grant FILE`: a stdio MCP server for one manual grant. It
//! lists the granted tools directly, under their real names and schemas,
//! and forwards each call once to the gateway under the grant's bearer. It
//! holds no operator credential and no seat channel, and refuses an
//! endpoint that is neither HTTPS nor loopback HTTP.
//!
//! Every call carries a receipt id chosen here before it leaves (the
//! caller's own in `_meta`, else a new one), so a lost answer is
//! reconciled by calling again with the same id: the host reads the
//! original and never dispatches twice.

use clankie_types::fleet::{Outcome, ReceiptId, ReceiptKind, meta};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use clankie_runtime::ErrorCode;

use super::echo::{Echo, GatewayHandler};
use crate::support::grant_file::{GrantFile, check_endpoint};

/// Where a call's receipt id travels (the gateway reads the same key).
const RECEIPT_META: &str = meta::RECEIPT;
/// How long one forwarded request may take.
const REQUEST_BUDGET: Duration = Duration::from_secs(30);

#[derive(Clone)]
struct GrantServer {
    grant: Arc<GrantFile>,
    up: Arc<Mutex<Option<RunningService<RoleClient, GatewayHandler>>>>,
    /// The harness's side: progress and log lines.
    echo: Echo,
}

impl GrantServer {
    /// The gateway session, opened (again) when there is none.
    async fn peer(&self) -> Result<rmcp::service::Peer<RoleClient>, String> {
        if clankie_runtime::now_ms() >= self.grant.expires_at_ms {
            return Err(format!(
                "{}: grant {} has expired; ask the owner to issue a new one (grants are never renewed)",
                ErrorCode::GrantExpired,
                self.grant.grant_id
            ));
        }
        let mut up = self.up.lock().await;
        if let Some(c) = up.as_ref()
            && !c.is_closed()
        {
            return Ok(c.peer().clone());
        }
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let cfg = StreamableHttpClientTransportConfig::with_uri(self.grant.endpoint.as_str())
            .auth_header(self.grant.bearer.clone())
            .reinit_on_expired_session(true);
        use clankie_runtime::telemetry::{TraceHeaders, mcp_http_client};
        let transport = clankie_runtime::mcp_tap::Tap::new(
            StreamableHttpClientTransport::with_client(TraceHeaders(mcp_http_client()), cfg),
            self.echo.observer(),
        );
        let handler = GatewayHandler {
            name: "clankie-grant-bridge",
            relist: None,
            echo: self.echo.clone(),
        };
        let running = tokio::time::timeout(Duration::from_secs(10), handler.serve(transport))
            .await
            .map_err(|_| "the gateway did not answer initialize in 10 s".to_string())?
            .map_err(|e| refusal(&e))?;
        let peer = running.peer().clone();
        *up = Some(running);
        if let Err(e) = self.echo.resend(&peer).await {
            tracing::debug!(error = %e, "log level not set on the new session");
        }
        Ok(peer)
    }

    async fn drop_session(&self) {
        if let Some(c) = self.up.lock().await.take() {
            let _ = c.cancel().await;
        }
    }
}

/// The codes the gateway refuses a grant's request with before anything
/// is forwarded.
const GRANT_REFUSALS: [ErrorCode; 5] = [
    ErrorCode::GrantExpired,
    ErrorCode::GrantRevoked,
    ErrorCode::GrantInvalid,
    ErrorCode::ServiceUnavailable,
    ErrorCode::FleetAdmissionUnavailable,
];

/// The refusal an rmcp error carries. The code travels in the refusal's
/// body and its `WWW-Authenticate` challenge, which rmcp keeps in the
/// error's fields, not always its text; so the Debug form is read
/// (`refusal.rs` reads the body or the challenge, never a bare name).
fn refused_with(e: &dyn std::fmt::Debug) -> Option<ErrorCode> {
    super::refusal::code_in(&format!("{e:?}")).filter(|c| GRANT_REFUSALS.contains(c))
}

/// Why the gateway refused to open a session.
fn refusal(e: &rmcp::service::ClientInitializeError) -> String {
    match refused_with(e) {
        Some(code) => format!("the gateway refused this grant: {code} ({e})"),
        None => format!("the gateway did not open a session: {e}"),
    }
}

/// A refusal of a call that was never forwarded: the same receipt id may
/// be used again.
fn not_forwarded(receipt_id: &str, code: ErrorCode, why: &str) -> CallToolResult {
    CallToolResult::structured_error(json!({
        "error": { "code": code.as_str(), "message": format!("{why}: {code}") },
        "receiptId": receipt_id,
    }))
}

/// An answer that carries no upstream result: the call may have applied.
fn uncertain(receipt_id: &str, why: &str) -> CallToolResult {
    let mut r = CallToolResult::structured_error(json!({
        "receiptId": receipt_id,
        "outcome": Outcome::Uncertain,
        "detail": format!("{why}; call again with the same receipt id in _meta to read its outcome"),
    }));
    let meta = r.meta.get_or_insert_with(Default::default);
    meta.insert(RECEIPT_META.into(), json!(receipt_id));
    r
}

impl ServerHandler for GrantServer {
    #[allow(deprecated, reason = "MCP logging is still what harnesses set")]
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        );
        let mut implementation = Implementation::from_build_env();
        implementation.name = "clankie-grant".into();
        implementation.version = env!("CARGO_PKG_VERSION").into();
        info.server_info = implementation;
        info.instructions = Some(format!(
            "Tools of {} granted to {} by grant {}; it expires and is not renewed.",
            self.grant.server, self.grant.principal_id, self.grant.grant_id
        ));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let peer = self
            .peer()
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?;
        let listed = tokio::time::timeout(REQUEST_BUDGET, peer.list_all_tools()).await;
        match listed {
            Ok(Ok(tools)) => Ok(ListToolsResult::with_all_items(tools)),
            Ok(Err(e)) => {
                self.drop_session().await;
                Err(ErrorData::invalid_request(e.to_string(), None))
            }
            Err(_) => {
                self.drop_session().await;
                Err(ErrorData::internal_error("tools/list timed out", None))
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.echo.attach(context.peer).await;
    }

    #[allow(deprecated, reason = "MCP logging is still what harnesses set")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.echo.set_level(request.level, self.peer().await).await
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let chosen = context
            .meta
            .0
            .get(RECEIPT_META)
            .and_then(Value::as_str)
            .map(str::to_string);
        let receipt_id = chosen.unwrap_or_else(|| ReceiptId::mint(ReceiptKind::Call).into_string());
        let span =
            tracing::info_span!("bridge.tools_call", tool = %request.name, otel.kind = "server");
        clankie_runtime::telemetry::adopt_meta_parent(&span, &context.meta);
        let mut meta = super::era::forwardable(&context.meta);
        meta.0.insert(RECEIPT_META.into(), json!(receipt_id));
        clankie_runtime::telemetry::inject_meta(&span, &mut meta);
        request.meta = Some(meta);
        let peer = match self.peer().await {
            Ok(p) => p,
            // Nothing left: the same id may simply be used again.
            Err(e) => return Err(ErrorData::internal_error(e, None)),
        };
        let called = {
            use tracing::Instrument as _;
            self.echo
                .call(&peer, request, REQUEST_BUDGET)
                .instrument(span)
                .await
        };
        Ok(super::era::complete(match called {
            Ok(result) => result,
            // The gateway answered with a JSON-RPC error that is not a
            // refusal of the grant itself (a tool the grant does not list):
            // nothing was dispatched, and the harness hears the same error.
            Err(rmcp::ServiceError::McpError(e)) if refused_with(&e).is_none() => return Err(e),
            Err(rmcp::ServiceError::Timeout { .. }) => {
                uncertain(&receipt_id, "no answer within 30 s")
            }
            // The gateway refused the request itself (a revoked or expired
            // grant): nothing was forwarded, so this is a refusal.
            Err(e) if refused_with(&e).is_some() => {
                self.drop_session().await;
                let code = refused_with(&e).unwrap_or(ErrorCode::GrantInvalid);
                not_forwarded(
                    &receipt_id,
                    code,
                    "the gateway refused this grant's call before forwarding it",
                )
            }
            // The door turned this one request away (a bare 429 or 503
            // with Retry-After): nothing was forwarded.
            Err(e) if let Some(text) = super::refusal::status_refusal(&e) => {
                let code = super::refusal::code_in(&text).unwrap_or(ErrorCode::ServiceUnavailable);
                not_forwarded(
                    &receipt_id,
                    code,
                    "the gateway turned this call away before forwarding it",
                )
            }
            // A failure the gateway answered with a status leaves the
            // session to the other calls on it; any other may mean the
            // connection is gone.
            Err(e) => {
                if !super::refusal::answered_with_status(&e) {
                    self.drop_session().await;
                }
                uncertain(&receipt_id, &format!("the gateway connection failed ({e})"))
            }
        })
        .into())
    }
}

pub async fn run(file: PathBuf) -> anyhow::Result<ExitCode> {
    clankie_runtime::telemetry::init("grant-bridge");
    let grant = GrantFile::read(&file)?;
    check_endpoint(&grant.endpoint)?;
    let server = GrantServer {
        grant: Arc::new(grant),
        up: Arc::new(Mutex::new(None)),
        echo: Echo::default(),
    };
    let running = server
        .clone()
        .serve(rmcp::transport::stdio())
        .await
        .context("serving MCP on stdio")?;
    let _ = running.waiting().await;
    server.drop_session().await;
    clankie_runtime::telemetry::shutdown();
    Ok(ExitCode::SUCCESS)
}
