//! Verifying an account: its provider identity read through its own MCP
//! connection, `get_user {query: "me"}` then `get_workspace`, on one
//! connection generation (one credential snapshot), recorded only when both
//! answer with stable ids. Then the account's grants follow: kept when the
//! identity is unchanged, invalidated when it changed.

use std::time::Duration;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

use crate::McpHost;
use crate::identity::{Change, Identity};

/// The tools a server offers its identity through.
pub(crate) const IDENTITY_TOOLS: [&str; 2] = ["get_user", "get_workspace"];

/// How long each identity read may take.
const READ: Duration = Duration::from_secs(10);

pub(crate) fn identity_pb(i: &Identity) -> mcphost_pb::AccountIdentity {
    mcphost_pb::AccountIdentity {
        user_id: i.user_id.clone(),
        workspace_id: i.workspace_id.clone(),
        email: i.email.clone(),
        workspace_name: i.workspace_name.clone(),
        verified_at_ms: i.verified_at_ms,
    }
}

/// A tool result as JSON: its structured content, else its text as JSON.
fn answer_json(r: &CallToolResult) -> Option<Value> {
    if r.is_error == Some(true) {
        return None;
    }
    if let Some(v @ Value::Object(_)) = &r.structured_content {
        return Some(v.clone());
    }
    let text = r.content.first()?.as_text()?.text.clone();
    serde_json::from_str(&text).ok()
}

impl McpHost {
    pub(crate) async fn verify_account(
        &self,
        name: &str,
    ) -> Result<mcphost_pb::VerifyAccountResponse, ClankieError> {
        let failed = |why: String| {
            ErrorCode::AccountUnavailable.err(format!(
                "verifying {name} failed, and nothing changed: {why}"
            ))
        };
        let generation = self
            .inner
            .accounts
            .verified_generation(name)
            .ok_or_else(|| failed("the account is not connected and verified".into()))?;
        // One connection for both reads: the same credential answers both.
        let (peer, _in_flight) = self.inner.accounts.dispatch_handle(name, generation)?;
        let read = |tool: &'static str, args: Value| {
            let peer = peer.clone();
            async move {
                let mut p = CallToolRequestParams::new(tool);
                p.arguments = args.as_object().cloned();
                match tokio::time::timeout(READ, peer.call_tool(p)).await {
                    Ok(Ok(r)) => answer_json(&r).ok_or_else(|| format!("{tool} gave no identity")),
                    Ok(Err(e)) => Err(format!("{tool}: {e}")),
                    Err(_) => Err(format!("{tool} did not answer in 10 s")),
                }
            }
        };
        let user = read("get_user", json!({"query": "me"}))
            .await
            .map_err(failed)?;
        let workspace = read("get_workspace", json!({})).await.map_err(failed)?;
        let identity = Identity::from_answers(&user, &workspace, now_ms()).map_err(failed)?;
        if self.inner.accounts.verified_generation(name) != Some(generation) {
            return Err(failed(
                "the account changed while it was being verified".into(),
            ));
        }
        let change = self.inner.identities.record(name, identity.clone())?;
        let invalidated = if change == Change::Changed {
            self.inner
                .grants
                .invalidate_account(name, "the account's identity changed on reverification")?
        } else {
            0
        };
        tracing::info!(
            account = name,
            change = change.as_str(),
            invalidated,
            "account.verified"
        );
        Ok(mcphost_pb::VerifyAccountResponse {
            identity: Some(identity_pb(&identity)),
            change: change.as_str().into(),
            invalidated_grants: invalidated as u32,
        })
    }

    /// The Linear project `id` names, as the connected Linear account reads
    /// it. There is no local fallback: no verified Linear account, no
    /// validation.
    pub(crate) async fn linear_project(
        &self,
        id: &str,
    ) -> Result<mcphost_pb::LinearProject, ClankieError> {
        let account = crate::tracker::ACCOUNT;
        let generation = self.inner.accounts.verified_generation(account).ok_or_else(|| {
            ErrorCode::AccountUnavailable.err(
                "no verified Linear account is connected, so the project cannot be validated (there is no local fallback)",
            )
        })?;
        let (peer, _in_flight) = self.inner.accounts.dispatch_handle(account, generation)?;
        let mut p = CallToolRequestParams::new("get_project");
        p.arguments = json!({"query": id}).as_object().cloned();
        let answer = match tokio::time::timeout(READ, peer.call_tool(p)).await {
            Ok(Ok(r)) => answer_json(&r),
            Ok(Err(e)) => {
                return Err(
                    ErrorCode::AccountUnavailable.err(format!("Linear did not answer: {e}"))
                );
            }
            Err(_) => {
                return Err(ErrorCode::AccountUnavailable.err("Linear did not answer in 10 s"));
            }
        };
        let found = answer.as_ref().and_then(|v| {
            let p = v.get("project").unwrap_or(v);
            (p.get("id").and_then(Value::as_str) == Some(id)).then(|| mcphost_pb::LinearProject {
                id: id.to_string(),
                name: p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            })
        });
        found.ok_or_else(|| {
            ErrorCode::TrackerNotFound.err(format!("Linear has no project {id} for this account"))
        })
    }

    /// The identity a grant on `server` is bound to: the verified provider
    /// identity when there is one, else the name the server gave itself.
    pub(crate) fn grant_identity(&self, server: &str, named: String) -> String {
        self.inner
            .identities
            .get(server)
            .map(|i| i.stable())
            .unwrap_or(named)
    }
}
