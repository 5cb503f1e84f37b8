//! A pane of this (remote) machine asks for a connected tool: the request
//! crosses the link to the main stack, where the tools are connected, and
//! its answer comes back as it was.
//!
//! The pane was proven here, from this machine's kernel; the main stack
//! admits the request as relayed by this machine. A call always crosses
//! with a receipt id (the bridge's, or one minted here), so a reply lost
//! with the link is answered `uncertain` under an id the caller can ask
//! about again once the link is back.

use clankie_proto::relay::v1 as relay_pb;
use clankie_types::fleet::args::CallArgs;
use clankie_types::fleet::{FleetTool, ReceiptId, ReceiptKind};
use rmcp::model::CallToolResult;
use serde_json::Value;

use super::dispatch::{call_result, refused};
use crate::fleet::Op;
use crate::uplink::{Outbox, Unanswered};
use clankie_runtime::{ClankieError, ErrorCode};

/// Relays `tool` with `args` for the operation's pane.
pub(crate) async fn forward(
    op: &Op<'_>,
    outbox: &Outbox,
    tool: FleetTool,
    args: Value,
) -> CallToolResult {
    let mut args = args;
    let mut receipt = None;
    if tool == FleetTool::Call {
        let call: CallArgs = match serde_json::from_value(args.clone()) {
            Ok(c) => c,
            Err(e) => {
                return refused(
                    &ErrorCode::ArgumentsInvalid.err(format!("{} arguments: {e}", tool.name())),
                );
            }
        };
        if let Some(name) = call.name.clone() {
            let id = match ReceiptId::given_or_mint(call.receipt_id.as_deref(), ReceiptKind::Call) {
                Ok(id) => id.into_string(),
                Err(e) => return refused(&ClankieError::from(e)),
            };
            args["receiptId"] = Value::from(id.clone());
            receipt = Some((id, name));
        }
    }
    let left = match op.budget.left() {
        Ok(left) => left,
        Err(e) => return refused(&e),
    };
    let mut trace = std::collections::HashMap::new();
    clankie_runtime::telemetry::inject_map(&mut trace);
    let request = relay_pb::Relayed {
        id: 0,
        pane_id: op.who.principal.pane_id.clone(),
        tool: tool.name().to_string(),
        args_json: args.to_string(),
        trace,
    };
    match outbox.send(request, left).await {
        Ok(json) => serde_json::from_str::<CallToolResult>(&json).unwrap_or_else(|e| {
            refused(&ErrorCode::Internal.err(format!("the main stack's answer is unreadable: {e}")))
        }),
        Err(Unanswered::NotSent) => {
            refused(&ErrorCode::RelayLinkDown.err(
                "this machine's link to the main stack is down; nothing was sent, retry shortly",
            ))
        }
        Err(Unanswered::Lost) => {
            match receipt {
                Some((id, name)) => call_result(crate::fleet::call::uncertain(
                    id,
                    name,
                    "the link to the main stack dropped before the answer came; the call may have run: call again with only this receiptId to learn its outcome",
                )),
                None => refused(&ErrorCode::ServiceUnavailable.err(
                    "the link to the main stack dropped before the answer came; retry shortly",
                )),
            }
        }
    }
}
