//! Real MCP clients (rmcp over streamable HTTP) and how the scenarios
//! read a tool's answer.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;

use crate::*;

/// An rmcp client over streamable HTTP with a bearer token.
pub async fn mcp_client(url: &str, token: &str) -> anyhow::Result<RunningService<RoleClient, ()>> {
    mcp_client_with(url, token, ()).await
}

/// An MCP client on `url` with `token` whose notifications go to `handler`.
pub async fn mcp_client_with<H: rmcp::ClientHandler>(
    url: &str,
    token: &str,
    handler: H,
) -> anyhow::Result<RunningService<RoleClient, H>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let cfg = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.to_string());
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(cfg);
    Ok(handler.serve(transport).await?)
}

/// Calls a gateway tool and returns its result.
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> anyhow::Result<CallToolResult> {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = args.as_object().cloned();
    Ok(client.call_tool(params).await?)
}

/// Calls `time_get_current_time` (mcp-server-time, account `time`) for
/// Etc/UTC through `clankie_call`; returns the result's structured content.
pub async fn utc_now(client: &RunningService<RoleClient, ()>) -> anyhow::Result<Value> {
    let r = call(
        client,
        "clankie_call",
        serde_json::json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    )
    .await?;
    Ok(structured(&r))
}

/// The structured content of a result. For a `clankie_call` answer that
/// passed an upstream result through, clankie's account of the call from
/// `_meta` (receipt, outcome, name, fromReceipt, detail) with the upstream's
/// own result under `result`, so a test reads every answer the same way.
pub fn structured(r: &CallToolResult) -> Value {
    use clankie_types::fleet::{CallMeta, meta};
    let account = r.meta.as_ref().and_then(|m| CallMeta::read(m));
    let Some(account) = account.filter(|a| a.outcome.is_some() && !a.envelope) else {
        return r.structured_content.clone().unwrap_or(Value::Null);
    };
    // A passed-through upstream result: clankie's account of the call from
    // `_meta`, the upstream's own result (without clankie's keys) as "result".
    let mut upstream = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Some(m) = upstream.get_mut("_meta").and_then(Value::as_object_mut) {
        m.retain(|k, _| !k.starts_with(meta::PREFIX));
        if m.is_empty() {
            upstream.as_object_mut().map(|o| o.remove("_meta"));
        }
    }
    let mut body = serde_json::json!({
        "receiptId": account.receipt_id,
        "outcome": account.outcome,
        "name": account.name,
        "fromReceipt": account.from_receipt,
        "result": upstream,
    });
    if !account.detail.is_empty() {
        body["detail"] = account.detail.into();
    }
    if account.trimmed {
        body["trimmed"] = true.into();
    }
    body
}

/// Waits until `clankie_tools` describes `tool` (its account verified).
pub async fn wait_tool(client: &RunningService<RoleClient, ()>, tool: &str) {
    let described = async || {
        let r = call(
            client,
            "clankie_tools",
            serde_json::json!({"names": [tool]}),
        )
        .await
        .ok()?;
        let tools = structured(&r)["tools"].as_array().cloned()?;
        (!tools.is_empty()).then_some(())
    };
    if eventually(Duration::from_secs(30), described)
        .await
        .is_none()
    {
        panic!("{tool} never appeared in the catalog");
    }
}
