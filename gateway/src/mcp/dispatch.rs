//! A fleet tool call on the MCP face: its arguments parsed into the tool's
//! type, the fleet operation it names, and the answer shaped as an MCP tool
//! result (a refusal is a structured error result, never a protocol error).

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::args::{
    CallArgs, CandidateArgs, NoArgs, PeerArgs, ReportArgs, ScheduleWakeArgs, ToolsArgs, VerdictArgs,
};
use clankie_types::fleet::{CallMeta, FleetTool, Outcome, ReceiptId, ReceiptKind};
use rmcp::model::CallToolResult;
use serde::Serialize;
use serde_json::{Value, json};

use super::hear::Hearing;
use crate::fleet::Op;

/// A refusal as the member reads it: `{"error": …}`, and the receipt id
/// when the refusal names one.
pub(crate) fn refused(e: &ClankieError) -> CallToolResult {
    tracing::info!(reason = e.code.as_str(), "bridge.refused");
    let mut body = json!({ "error": e.body() });
    if let Some(id) = e.details_json().and_then(|d| {
        d.get("receiptId")
            .and_then(Value::as_str)
            .map(str::to_string)
    }) {
        body["receiptId"] = json!(id);
    }
    CallToolResult::structured_error(body)
}

/// An operation's answer as a structured result, or its refusal.
pub(super) fn answer<T: Serialize>(r: Result<T, ClankieError>) -> CallToolResult {
    match r
        .and_then(|v| serde_json::to_value(v).map_err(|e| ErrorCode::Internal.err(e.to_string())))
    {
        Ok(v) => CallToolResult::structured(v),
        Err(e) => refused(&e),
    }
}

/// A call's answer from mcp-host, as the member sees it: the upstream's own
/// result as it was sent (content blocks, `structuredContent`, `isError`,
/// `_meta`), with the receipt and outcome added to `_meta`. With no
/// upstream result to pass on (uncertain, trimmed, a protocol error), the
/// structured content is clankie's account of the call instead.
pub(crate) fn call_result(result: mcphost_pb::CallResult) -> CallToolResult {
    let upstream: Value = if result.result_json.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&result.result_json).unwrap_or(Value::Null)
    };
    let passed = match &upstream {
        Value::Object(o) if o.contains_key("content") || o.contains_key("structuredContent") => {
            serde_json::from_value::<CallToolResult>(upstream.clone()).ok()
        }
        _ => None,
    };
    let enveloped = passed.is_none();
    let outcome = Outcome::from_wire(result.outcome);
    let mut out = passed.unwrap_or_else(|| {
        let mut body = json!({
            "receiptId": result.receipt_id,
            "outcome": outcome,
            "name": result.name,
            "result": upstream,
            "fromReceipt": result.from_receipt,
        });
        if !result.detail.is_empty() {
            body["detail"] = json!(result.detail);
        }
        if result.trimmed {
            body["trimmed"] = json!(true);
        }
        // Uncertain is not an error: the call may well have applied.
        if outcome == Some(Outcome::Error) {
            CallToolResult::structured_error(body)
        } else {
            CallToolResult::structured(body)
        }
    });
    let account = CallMeta {
        receipt_id: result.receipt_id,
        outcome,
        name: result.name,
        from_receipt: result.from_receipt,
        detail: result.detail,
        trimmed: result.trimmed,
        envelope: enveloped,
    };
    account.write(out.meta.get_or_insert_with(Default::default));
    out
}

/// A tool's arguments in its own type; arguments that do not fit are
/// refused naming the tool.
fn parse<A: serde::de::DeserializeOwned>(tool: FleetTool, args: Value) -> Result<A, ClankieError> {
    serde_json::from_value(args)
        .map_err(|e| ErrorCode::ArgumentsInvalid.err(format!("{} arguments: {e}", tool.name())))
}

/// What the review tools need.
const REVIEW_SEAT: &str = "reviews need a native seat";

/// Runs fleet tool `tool` for the operation's member. `hearing` is what
/// the caller of a connected call asked to hear.
pub(crate) async fn dispatch(
    op: &Op<'_>,
    tool: FleetTool,
    args: Value,
    hearing: Option<&Hearing>,
) -> CallToolResult {
    // On an enrolled machine, its panes' connected tools are the main
    // stack's: they cross the link (`relayed.rs`).
    if let Some(outbox) = &op.shared.relay_out
        && op.who.is_seat()
        && crate::uplink::crosses(tool)
    {
        return super::relayed::forward(op, outbox, tool, args).await;
    }
    match tool {
        FleetTool::Tools => match parse::<ToolsArgs>(tool, args) {
            Ok(args) => answer(op.tools(args).await),
            Err(e) => refused(&e),
        },
        FleetTool::Call => match parse::<CallArgs>(tool, args) {
            Ok(args) => match op.call(args, hearing).await {
                Ok(result) => call_result(result),
                Err(e) => refused(&e),
            },
            Err(e) => refused(&e),
        },
        FleetTool::Submit => refused(&ErrorCode::InvalidArgument.err(
            "submit_for_review reads the change from your checkout: call it through \
             `clankie mcp --fleet`, or run `clankie review submit` in your pane",
        )),
        FleetTool::Candidate => answer(
            async {
                let c: CandidateArgs = parse(tool, args)?;
                op.seat(REVIEW_SEAT)?;
                op.candidate(c.candidate_id).await
            }
            .await,
        ),
        FleetTool::Verdict => answer(
            async {
                let v: VerdictArgs = parse(tool, args)?;
                op.seat(REVIEW_SEAT)?;
                op.verdict(v).await
            }
            .await,
        ),
        FleetTool::GetWake => answer(op.get_wake().await),
        FleetTool::ScheduleWake => answer(
            async {
                let w: ScheduleWakeArgs = parse(tool, args)?;
                op.schedule_wake(w).await
            }
            .await,
        ),
        FleetTool::Peers => answer(
            async {
                let _: NoArgs = parse(tool, args)?;
                op.seat("list_fleet_seats needs a native seat")?;
                op.peers().await
            }
            .await,
        ),
        FleetTool::Peer => answer(
            async {
                let p: PeerArgs = parse(tool, args)?;
                op.seat("message_peer needs a native seat")?;
                let receipt = ReceiptId::given_or_mint(p.receipt_id.as_deref(), ReceiptKind::Peer)?
                    .into_string();
                op.send_peer(p.seat, p.text, receipt).await
            }
            .await,
        ),
        FleetTool::Report => answer(
            async {
                let r: ReportArgs = parse(tool, args)?;
                op.report(r).await
            }
            .await,
        ),
    }
}
