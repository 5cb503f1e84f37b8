//! A connected call (`clankie_call`): the arguments checked, the receipt id
//! fixed before anything leaves, the forward to mcp-host (streamed when the
//! caller asked to hear progress or log lines), and the host's account of
//! the call. A call whose verdict is lost after the forward is `uncertain`.

use std::future::Future;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::grpc::Client;
use clankie_runtime::limits;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::args::CallArgs;
use clankie_types::fleet::outcome::LOST_AFTER_FORWARD;
use clankie_types::fleet::{Outcome, ReceiptId, ReceiptKind};
use serde_json::json;

use super::{Op, unanswered, with_receipt};
use clankie_runtime::clients::{Answer as _, Call, Unanswered};

type McpHost = mcphost_pb::mcp_host_client::McpHostClient<Client>;

/// What a caller hears while its call runs (the MCP face relays it).
pub(crate) trait Listener: Send + Sync {
    /// Whether upstream progress steps are wanted.
    fn wants_progress(&self) -> bool;
    /// The least level of log lines wanted on this call; empty for none.
    fn log_level(&self) -> &str;
    fn progress(&self, step: mcphost_pb::CallProgress) -> impl Future<Output = ()> + Send;
    fn line(&self, line: mcphost_pb::LogLine) -> impl Future<Output = ()> + Send;
}

/// The forward to mcp-host: streamed when its caller listens, else unary.
/// A stream that ends without its result is a lost answer.
pub(crate) async fn forward<L: Listener>(
    mcp: &mut McpHost,
    mut req: tonic::Request<mcphost_pb::CallToolRequest>,
    listener: Option<&L>,
) -> Result<tonic::Response<mcphost_pb::CallResult>, tonic::Status> {
    let Some(listener) = listener else {
        return mcp.call_tool(req).await;
    };
    req.get_mut().progress = listener.wants_progress();
    req.get_mut().log_level = listener.log_level().to_string();
    let mut events = mcp.call_tool_events(req).await?.into_inner();
    while let Some(event) = events.message().await? {
        match event.event {
            Some(mcphost_pb::call_event::Event::Result(r)) => return Ok(tonic::Response::new(r)),
            Some(mcphost_pb::call_event::Event::Progress(p)) => listener.progress(p).await,
            Some(mcphost_pb::call_event::Event::Log(line)) => listener.line(line).await,
            None => {}
        }
    }
    Err(tonic::Status::unavailable(
        "the call's event stream ended without its result",
    ))
}

/// How long telling the host of a caller's cancel may take.
pub(crate) const CANCEL_NOTICE: std::time::Duration = std::time::Duration::from_secs(2);

/// What a cancelled call answers (a caller that cancelled reads its
/// receipt to learn what happened).
pub(crate) fn cancelled_by_caller() -> ClankieError {
    ErrorCode::InvalidArgument.err(
        "cancelled by the caller: a call not yet sent was not sent; one that was sent is cancelled at its upstream and its receipt says what happened",
    )
}

/// Tells the host of a caller's cancel; what it says is only logged.
pub(crate) async fn tell_cancelled(
    sent: impl Future<Output = Result<tonic::Response<mcphost_pb::CancelCallResponse>, tonic::Status>>,
) {
    match sent.await.answer() {
        Ok(r) => tracing::info!(running = r.cancelled, "bridge.call.cancelled"),
        Err(e) => tracing::info!(reason = e.code.as_str(), "bridge.call.cancel_unheard"),
    }
}

/// The account of a call whose answer was lost after it left.
pub(crate) fn uncertain(receipt_id: String, name: String, detail: &str) -> mcphost_pb::CallResult {
    mcphost_pb::CallResult {
        receipt_id,
        outcome: Outcome::Uncertain.wire(),
        name,
        detail: detail.into(),
        ..Default::default()
    }
}

impl Op<'_> {
    /// `clankie_call`: a call by name, or a receipt read back.
    pub(crate) async fn call<L: Listener>(
        &self,
        args: CallArgs,
        listener: Option<&L>,
    ) -> Result<mcphost_pb::CallResult, ClankieError> {
        let answer = self.call_once(args, listener).await;
        // The console lists recent calls: it looks again now.
        self.shared.console.changed();
        answer
    }

    async fn call_once<L: Listener>(
        &self,
        args: CallArgs,
        listener: Option<&L>,
    ) -> Result<mcphost_pb::CallResult, ClankieError> {
        if let Some(id) = &args.receipt_id {
            ReceiptId::parse(id)?;
        }
        let Some(name) = args.name else {
            let Some(receipt_id) = args.receipt_id else {
                return Err(
                    ErrorCode::InvalidArgument.err("give a tool name, or a receiptId to reconcile")
                );
            };
            return self.reconcile(receipt_id).await;
        };
        if name.len() > limits::field::TOOL_NAME {
            return Err(ErrorCode::InvalidArgument.err(format!(
                "a tool name is at most {} bytes",
                limits::field::TOOL_NAME
            )));
        }
        let arguments = args.arguments.unwrap_or_else(|| json!({}));
        if !arguments.is_object() {
            return Err(ErrorCode::InvalidArgument.err("arguments must be an object"));
        }
        // The receipt id is fixed before anything leaves, so every answer
        // after this point can name it.
        let receipt_id =
            ReceiptId::given_or_mint(args.receipt_id.as_deref(), ReceiptKind::Call)?.into_string();
        let req = mcphost_pb::CallToolRequest {
            name: name.clone(),
            arguments_json: arguments.to_string(),
            receipt_id: receipt_id.clone(),
            background: args.background,
            ..Default::default()
        };
        let req = self
            .request(req)
            .map_err(|e| with_receipt(e, &receipt_id))?;
        let mut mcp = self.shared.mcp.clone();
        let work = forward(&mut mcp, req, listener);
        let cancelled = async {
            match &self.cancelled {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let reply = tokio::select! {
                reply = work => reply,
                // The gateway is stopping and the drain is over.
                _ = self.shared.drain.over.cancelled() => {
                    tracing::info!("bridge.call.stopped");
                    return Ok(uncertain(receipt_id, name, crate::drain::STOPPED));
                }
                _ = cancelled => {
                    let req = Call::new(mcphost_pb::CancelCallRequest {
                        receipt_id: receipt_id.clone(),
                    })
                    .timeout(CANCEL_NOTICE)
                    .ticket(&self.who.ticket)
                    .request();
                    tell_cancelled(self.shared.mcp.clone().cancel_call(req)).await;
                    return Err(with_receipt(cancelled_by_caller(), &receipt_id));
                }
        };
        match reply.verdict() {
            Ok(result) => Ok(result),
            Err(Unanswered::Verdict(e)) => Err(with_receipt(e, &receipt_id)),
            // The request left and no verdict came back (a reset, a
            // timeout, the host dying): it may have been dispatched.
            Err(Unanswered::Lost(s)) => {
                tracing::info!(grpc = ?s.code(), "bridge.call.uncertain");
                Ok(uncertain(receipt_id, name, LOST_AFTER_FORWARD))
            }
        }
    }

    /// Reads a receipt back. Reconciling only reads: a lost answer is
    /// simply unavailable.
    async fn reconcile(&self, receipt_id: String) -> Result<mcphost_pb::CallResult, ClankieError> {
        let req = self.request(mcphost_pb::GetReceiptRequest { receipt_id })?;
        self.shared
            .mcp
            .clone()
            .get_receipt(req)
            .await
            .verdict()
            .map_err(unanswered)
    }

    /// The catalog's revision and connected accounts right now (the last
    /// seen ones if mcp-host cannot answer).
    pub(crate) async fn catalog_now(&self) -> mcphost_pb::CatalogInfo {
        let Ok(req) = self.request(mcphost_pb::CatalogRequest {}) else {
            return self.shared.catalog.borrow().clone();
        };
        match self.shared.mcp.clone().catalog(req).await {
            Ok(c) => c.into_inner(),
            Err(_) => self.shared.catalog.borrow().clone(),
        }
    }
}
