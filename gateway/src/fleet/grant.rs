//! A manual grant's operations: its granted tools, and one call forwarded
//! once to mcp-host under the grant's bearer. A grant session has no seat,
//! no bridge tools and no fleet.

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::ClankieError;
use clankie_runtime::clients::Call;

use super::call::{CANCEL_NOTICE, Listener, forward, tell_cancelled, uncertain};
use super::{Budget, unanswered, with_receipt};
use crate::Shared;
use clankie_runtime::clients::{Answer as _, Unanswered};

/// What a grant call answers when the host went quiet after the call left.
const LOST: &str = "the host did not answer after the call left: it may have applied; \
                    call again with the same receipt id to read its outcome";

/// One grant's operations, under its bearer.
pub(crate) struct GrantOp<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) bearer: &'a str,
    pub(crate) budget: Budget,
}

impl GrantOp<'_> {
    fn request<T>(&self, msg: T) -> Result<tonic::Request<T>, ClankieError> {
        Ok(Call::new(msg)
            .timeout(self.budget.left()?)
            .grant(self.bearer)
            .request())
    }

    /// The granted tools, under their real names and schemas.
    pub(crate) async fn tools(&self) -> Result<Vec<mcphost_pb::ToolDescription>, ClankieError> {
        let req = self.request(mcphost_pb::GrantToolsRequest {})?;
        Ok(self
            .shared
            .mcp
            .clone()
            .grant_tools(req)
            .await
            .verdict()
            .map_err(unanswered)?
            .tools)
    }

    /// Tells the host the caller cancelled its call `receipt_id`.
    pub(crate) async fn cancel(&self, receipt_id: &str) {
        let req = Call::new(mcphost_pb::CancelCallRequest {
            receipt_id: receipt_id.to_string(),
        })
        .timeout(CANCEL_NOTICE)
        .grant(self.bearer)
        .request();
        tell_cancelled(self.shared.mcp.clone().cancel_call(req)).await;
    }

    /// One granted tool, forwarded once under `receipt_id` (fixed by the
    /// caller before anything leaves).
    pub(crate) async fn call<L: Listener>(
        &self,
        name: String,
        arguments_json: String,
        receipt_id: &str,
        listener: Option<&L>,
    ) -> Result<mcphost_pb::CallResult, ClankieError> {
        let msg = mcphost_pb::CallToolRequest {
            name,
            arguments_json,
            receipt_id: receipt_id.to_string(),
            ..Default::default()
        };
        let req = self.request(msg).map_err(|e| with_receipt(e, receipt_id))?;
        let mut mcp = self.shared.mcp.clone();
        let reply = tokio::select! {
            reply = forward(&mut mcp, req, listener) => reply,
            // The gateway is stopping and the drain is over.
            _ = self.shared.drain.over.cancelled() => {
                return Ok(uncertain(receipt_id.to_string(), String::new(), crate::drain::STOPPED));
            }
        };
        match reply.verdict() {
            Ok(r) => Ok(r),
            Err(Unanswered::Verdict(e)) => Err(with_receipt(e, receipt_id)),
            Err(Unanswered::Lost(s)) => {
                tracing::info!(grpc = ?s.code(), "bridge.grant_call.uncertain");
                Ok(uncertain(receipt_id.to_string(), String::new(), LOST))
            }
        }
    }
}
