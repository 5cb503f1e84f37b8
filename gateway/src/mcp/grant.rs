//! A manual grant's session on `/mcp`: its granted tools, listed directly
//! under their real names and schemas, and each call forwarded once to the
//! mcp-host under the grant's bearer. The upstream's result comes back as it
//! was sent (content blocks, `structuredContent`, `isError`, `_meta`), with
//! the receipt id and outcome added to `_meta`. A grant session has no
//! bridge tools, no seat channel and no fleet.

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::{Outcome, ReceiptId, ReceiptKind, meta};
use rmcp::ErrorData;
use rmcp::model::{CallToolRequestParams, CallToolResult, ListToolsResult, RequestMetaObject};
use serde_json::{Value, json};

use super::dispatch::{call_result, refused};
use super::hear::Hearing;
use crate::fleet::grant::GrantOp;

/// Where a grant call's receipt id travels, both ways.
pub const RECEIPT_META: &str = meta::RECEIPT;
#[cfg(test)]
const OUTCOME_META: &str = meta::OUTCOME;

/// A grant call's receipt id, fixed before anything leaves: the caller's
/// own (from `_meta`), or a new one.
pub(super) fn receipt_for(meta: &RequestMetaObject) -> Result<String, ClankieError> {
    let given = meta.0.get(RECEIPT_META).and_then(Value::as_str);
    Ok(ReceiptId::given_or_mint(given, ReceiptKind::Call)?.into_string())
}

/// The answer to a grant call still running when its grant was revoked:
/// the call may have applied (its receipt says, to the owner), and the
/// session closes right after.
pub(super) fn revoked_mid_call(receipt_id: &str) -> CallToolResult {
    call_result(mcphost_pb::CallResult {
        receipt_id: receipt_id.to_string(),
        outcome: Outcome::Uncertain.wire(),
        detail: "the grant was revoked while this call ran: it may have applied, and this \
                 session is closing"
            .into(),
        ..Default::default()
    })
}

/// The granted tools, under their real names and schemas.
pub(super) async fn list(op: &GrantOp<'_>) -> Result<ListToolsResult, ErrorData> {
    let tools = op
        .tools()
        .await
        .map_err(|e| ErrorData::invalid_request(e.to_string(), Some(e.body())))?;
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": serde_json::from_str::<Value>(&t.input_schema_json)
                    .unwrap_or_else(|_| json!({"type": "object"})),
            })
        })
        .collect();
    serde_json::from_value(json!({ "tools": tools }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// One granted tool, forwarded once under `receipt_id`. A name the grant
/// does not list is a protocol error (-32602), as an unknown tool is on the
/// fleet door; every other refusal is a result with its reason.
pub(super) async fn call(
    op: &GrantOp<'_>,
    request: CallToolRequestParams,
    receipt_id: &str,
    hearing: Option<&Hearing>,
) -> Result<CallToolResult, ErrorData> {
    let arguments = Value::Object(request.arguments.unwrap_or_default()).to_string();
    match op
        .call(request.name.to_string(), arguments, receipt_id, hearing)
        .await
    {
        Ok(r) => Ok(call_result(r)),
        Err(e) if e.code == ErrorCode::UnknownTool => {
            Err(ErrorData::invalid_params(e.message, None))
        }
        Err(e) => Ok(refused(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_blocks_pass_through_with_the_receipt_added() {
        let upstream = json!({
            "content": [
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "text", "text": "hi"}
            ],
            "structuredContent": {"n": 1},
            "isError": false,
            "_meta": {"upstream/key": "kept"}
        });
        let out = call_result(mcphost_pb::CallResult {
            receipt_id: "r1".into(),
            outcome: Outcome::Ok.wire(),
            result_json: upstream.to_string(),
            ..Default::default()
        });
        let v = serde_json::to_value(&out).expect("json");
        assert_eq!(v["content"], upstream["content"]);
        assert_eq!(v["structuredContent"], upstream["structuredContent"]);
        assert_eq!(v["_meta"]["upstream/key"], "kept");
        assert_eq!(v["_meta"][RECEIPT_META], "r1");
        assert_eq!(v["_meta"][OUTCOME_META], "ok");
    }

    #[test]
    fn an_uncertain_call_names_its_receipt() {
        let out = call_result(mcphost_pb::CallResult {
            receipt_id: "r2".into(),
            outcome: Outcome::Uncertain.wire(),
            detail: "deadline".into(),
            ..Default::default()
        });
        let v = serde_json::to_value(&out).expect("json");
        assert_eq!(v["isError"], false, "uncertain is not an error");
        assert_eq!(v["structuredContent"]["receiptId"], "r2");
        assert_eq!(v["_meta"]["clankie/envelope"], true);
        assert_eq!(v["_meta"][OUTCOME_META], "uncertain");
    }
}
