//! The MCP face: the fleet tools served to members over streamable HTTP.
//! The two meta tools (`clankie_tools`, `clankie_call`) while connected
//! tools are on, `message_clankie`, the peer tools while peer messages are
//! on, the review tools for a project that names a reviewer, the wake tools
//! for a lead; a manual grant's session lists its granted tools instead.
//! Each request was admitted by a door (`doors/`); the handler parses it and
//! runs the fleet operation (`fleet/`) it names.

pub(crate) mod dispatch;
mod grant;
mod hear;
mod relayed;
mod watch;

pub(crate) use watch::announce;

use std::sync::Arc;

use clankie_types::fleet::FleetTool;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use tracing::Instrument as _;

use crate::Shared;
use crate::doors::Admitted;
use crate::fleet::grant::GrantOp;
use crate::fleet::{Budget, Op};

/// One MCP session's handler (the service makes one per session).
#[derive(Clone)]
pub struct Bridge {
    shared: Arc<Shared>,
    /// The log level this session chose.
    level: hear::SessionLevel,
}

impl Bridge {
    pub fn new(shared: Arc<Shared>) -> Self {
        Bridge {
            shared,
            level: Default::default(),
        }
    }
}

fn admitted(
    context: &RequestContext<RoleServer>,
) -> Result<(Admitted, http::HeaderMap), ErrorData> {
    let parts = context
        .extensions
        .get::<http::request::Parts>()
        .ok_or_else(|| ErrorData::internal_error("the request carried no HTTP context", None))?;
    let admitted = parts
        .extensions
        .get::<Admitted>()
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request was not admitted", None))?;
    Ok((admitted, parts.headers.clone()))
}

impl ServerHandler for Bridge {
    #[allow(deprecated, reason = "MCP logging is still what clients set")]
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .build(),
        );
        let mut implementation = Implementation::from_build_env();
        implementation.name = "clankie".into();
        implementation.version = env!("CARGO_PKG_VERSION").into();
        info.server_info = implementation;
        let connected = self.shared.catalog.borrow().connected.clone();
        info.instructions = Some(format!(
            "Clankie's connected MCP accounts are reachable through clankie_tools (search, then \
             describe) and clankie_call. Connected now: {}.",
            if connected.is_empty() {
                "none".into()
            } else {
                connected.join(", ")
            }
        ));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (a, headers) = admitted(&context)?;
        let span = tracing::info_span!("mcp.tools_list", otel.kind = "server");
        clankie_runtime::telemetry::adopt_mcp_parent(&span, &context.meta, &headers);
        if let Some(bearer) = &a.grant {
            let op = GrantOp {
                shared: &self.shared,
                bearer,
                budget: Budget::start(self.shared.request_budget),
            };
            return grant::list(&op).instrument(span).await;
        }
        async move {
            let info = if a.tools_on {
                Op::new(&self.shared, &a).catalog_now().await
            } else {
                self.shared.catalog.borrow().clone()
            };
            // Review tools only when the seat's project has a standing
            // reviewer (and the mailbox answers).
            let families = crate::listing::seat_families(&self.shared, &a).await;
            let listed = crate::listing::listing(&self.shared, &a, a.tools_on, &info, families);
            serde_json::from_value(listed)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))
        }
        .instrument(span)
        .await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (a, headers) = admitted(&context)?;
        let span =
            tracing::info_span!("mcp.tools_call", tool = %request.name, otel.kind = "server");
        clankie_runtime::telemetry::adopt_mcp_parent(&span, &context.meta, &headers);
        let budget = Budget::start(self.shared.request_budget);
        // A connected call stops when its caller cancels it: the forward to
        // mcp-host is dropped, and the host stops the call at its dispatch
        // boundary if it had not dispatched (after dispatch it settles, and
        // the caller reconciles by its receipt). Only connected calls: the
        // seat tools finish what they started.
        let ct = context.ct.clone();
        let cancelled = || ErrorData::invalid_request("cancelled by the caller", None);
        if let Some(bearer) = &a.grant {
            let receipt_id = match grant::receipt_for(&context.meta) {
                Ok(id) => id,
                Err(e) => return Ok(dispatch::refused(&e).into()),
            };
            // A revoke answers this call before its session closes.
            let (revoked, _in_flight) = self.shared.grant_calls.enter(&a.principal.link_id);
            let hearing = hear::Hearing::asked(&context.peer, &context.meta, &self.level, true);
            let op = GrantOp {
                shared: &self.shared,
                bearer,
                budget,
            };
            let work = grant::call(&op, request, &receipt_id, hearing.as_ref());
            return tokio::select! {
                r = work.instrument(span) => r.map(Into::into),
                _ = revoked.cancelled() => Ok(grant::revoked_mid_call(&receipt_id).into()),
                _ = ct.cancelled() => {
                    op.cancel(&receipt_id).await;
                    Err(cancelled())
                }
            };
        }
        let Some(tool) = FleetTool::parse(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {}: this server has clankie_tools and clankie_call",
                    clankie_runtime::limits::clip(&request.name, 64)
                ),
                None,
            ));
        };
        let op = Op::within(&self.shared, &a, budget).cancelled_by(ct.clone());
        let args = Value::Object(request.arguments.unwrap_or_default());
        if tool == FleetTool::Call {
            // The call itself hears the cancel: it tells the host, which
            // tells the upstream, before the caller is answered.
            let hearing = hear::Hearing::asked(&context.peer, &context.meta, &self.level, false);
            let r = dispatch::dispatch(&op, tool, args, hearing.as_ref())
                .instrument(span)
                .await;
            return if ct.is_cancelled() {
                Err(cancelled())
            } else {
                Ok(r.into())
            };
        }
        Ok(dispatch::dispatch(&op, tool, args, None)
            .instrument(span)
            .await
            .into())
    }

    #[allow(deprecated, reason = "MCP logging is still what clients set")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (a, _) = admitted(&context)?;
        let level = serde_json::to_value(request.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .ok_or_else(|| ErrorData::invalid_params("an MCP logging level", None))?;
        self.level.set(level);
        // A fleet session reads the account-wide feed; a grant session
        // hears only what lands on its own calls.
        if a.grant.is_none() {
            self.level
                .read_feed(self.shared.clone(), context.peer.clone());
        }
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self.shared.peers.lock();
        peers.retain(|p| !p.is_transport_closed());
        peers.push(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        if requested.tools_list_changed == Some(true) {
            accepted.tools_list_changed = Some(true);
        }
        Some(accepted)
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        let mut announced = self.shared.announced.subscribe();
        announced.borrow_and_update();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                r = announced.changed() => if r.is_err() { return Ok(()) },
            }
            if context.sink().notify_tool_list_changed().await.is_err() {
                return Ok(());
            }
        }
    }
}
