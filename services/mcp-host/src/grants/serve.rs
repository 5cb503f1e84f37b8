//! The mcp-host's side of manual grants: issuing (the owner's), who a
//! grant bearer is, the granted tools under their real names, and how a
//! granted name resolves for the call path.

use std::sync::Arc;

use clankie_proto::common::v1::{AdmissionMode, Principal};
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use serde_json::{Map, Value};
use tonic::metadata::MetadataMap;

use super::rules::{GrantedTool, worker_publishing};
use super::{GrantRecord, Issue};
use crate::{McpHost, Requester, catalog};

/// A call made under a manual grant: the bearer it came with, and the
/// grant as it stood when the request arrived.
#[derive(Debug, Clone)]
pub struct GrantCaller {
    pub bearer: String,
    pub grant: GrantRecord,
}

/// The principal of every call under `grant`: its own, never a fleet's.
pub(crate) fn principal(grant: &GrantRecord) -> Principal {
    Principal {
        fleet_id: "grant".into(),
        pane_id: String::new(),
        mode: AdmissionMode::Grant as i32,
        link_id: grant.grant_id.clone(),
        machine: String::new(),
    }
}

pub(crate) fn grant_pb(g: &GrantRecord) -> mcphost_pb::Grant {
    mcphost_pb::Grant {
        grant_id: g.grant_id.clone(),
        kind: g.kind.clone(),
        principal_id: g.principal_id.clone(),
        work_id: g.work_id.clone(),
        server: g.server.clone(),
        tools: g
            .tools
            .iter()
            .map(|t| mcphost_pb::GrantTool {
                name: t.name.clone(),
                arguments_json: if t.arguments.is_empty() {
                    String::new()
                } else {
                    Value::Object(t.arguments.clone()).to_string()
                },
                forbidden_arguments: t.forbidden_arguments.clone(),
            })
            .collect(),
        project: g.project.clone(),
        issued_at_ms: g.issued_at_ms,
        expires_at_ms: g.expires_at_ms,
        standing: g.standing(now_ms()).wire(),
        revoked_at_ms: g.revoked_at_ms.unwrap_or(0),
        invalidated: g.invalidated.clone().unwrap_or_default(),
    }
}

fn granted_tool(t: &mcphost_pb::GrantTool) -> Result<GrantedTool, ClankieError> {
    let arguments: Map<String, Value> = if t.arguments_json.trim().is_empty() {
        Map::new()
    } else {
        match serde_json::from_str(&t.arguments_json) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(ErrorCode::InvalidArgument
                    .err(format!("the arguments of {} are one JSON object", t.name)));
            }
        }
    };
    Ok(GrantedTool {
        name: t.name.clone(),
        arguments,
        forbidden_arguments: t.forbidden_arguments.clone(),
    })
}

impl McpHost {
    /// The grant caller a request's `x-clankie-grant` names, if it names
    /// one; refused when the bearer is unknown, expired or revoked.
    pub(crate) fn grant_caller(
        &self,
        metadata: &MetadataMap,
    ) -> Option<Result<Requester, ClankieError>> {
        let bearer = clankie_runtime::grpc::grant(metadata)?.to_string();
        Some(
            self.inner
                .grants
                .authenticate(&bearer)
                .map(|grant| Requester::Grant(Box::new(GrantCaller { bearer, grant }))),
        )
    }

    /// Issues a grant for tools the server has now, under their real
    /// names. The built-in tracker's vocabulary is not granted (workers
    /// reach it through the fleet bridge, with their role); a
    /// worker-publishing tool needs an exact `personaId` pin.
    pub(crate) fn issue_grant(
        &self,
        req: mcphost_pb::IssueGrantRequest,
    ) -> Result<mcphost_pb::IssueGrantResponse, ClankieError> {
        let tools = req
            .tools
            .iter()
            .map(granted_tool)
            .collect::<Result<Vec<_>, _>>()?;
        let identity = self
            .inner
            .accounts
            .verified_identity(&req.server)
            .ok_or_else(|| {
                ErrorCode::AccountUnavailable.err(format!(
                    "{} is not a verified connected account; a grant names one",
                    req.server
                ))
            })?;
        let identity = self.grant_identity(&req.server, identity);
        let catalog = self.catalog();
        for t in &tools {
            self.granted_entry(&catalog, &req.server, t)?;
        }
        let (grant, bearer) = self.inner.grants.issue(Issue {
            principal_id: req.principal_id,
            work_id: req.work_id,
            server: req.server,
            tools,
            ttl_seconds: req.ttl_seconds,
            account_identity: identity,
        })?;
        tracing::info!(grant = %grant.grant_id, server = %grant.server, tools = grant.tools.len(), "grant.issued");
        Ok(mcphost_pb::IssueGrantResponse {
            grant: Some(grant_pb(&grant)),
            bearer,
        })
    }

    /// The catalog entry of one granted tool, as the grant allows it.
    fn granted_entry(
        &self,
        catalog: &catalog::Catalog,
        server: &str,
        tool: &GrantedTool,
    ) -> Result<Arc<catalog::Entry>, ClankieError> {
        let entry = catalog.grant_entry(server, &tool.name).ok_or_else(|| {
            ErrorCode::UnknownTool.err(format!(
                "{server} has no tool {} now; use its real name",
                tool.name
            ))
        })?;
        if entry.builtin {
            return Err(ErrorCode::ToolNotGranted.err(format!(
                "{} is the built-in tracker's; workers reach it through the fleet bridge",
                tool.name
            )));
        }
        if worker_publishing(&tool.name) && !tool.pins_persona() {
            return Err(ErrorCode::ToolNotGranted.err(format!(
                "{} publishes as a worker persona: the grant must pin an exact personaId",
                tool.name
            )));
        }
        Ok(entry)
    }

    /// What a name resolves to under a grant: one of its tools, by real name.
    pub(crate) fn resolve_granted(
        &self,
        caller: &GrantCaller,
        name: &str,
    ) -> Result<(Arc<catalog::Entry>, GrantedTool), ClankieError> {
        // A name the grant does not list is unknown on its door, as a name
        // the fleet door does not serve is on that one.
        let tool = caller.grant.tool(name).cloned().ok_or_else(|| {
            ErrorCode::UnknownTool.err(format!(
                "unknown tool {name}: grant {} serves only the tools it lists",
                caller.grant.grant_id
            ))
        })?;
        let entry = self.granted_entry(&self.catalog(), &caller.grant.server, &tool)?;
        Ok((entry, tool))
    }

    /// The granted tools under their real names and schemas (a tool the
    /// server no longer has is left out).
    pub(crate) fn grant_tools(&self, caller: &GrantCaller) -> Vec<mcphost_pb::ToolDescription> {
        let catalog = self.catalog();
        caller
            .grant
            .tools
            .iter()
            .filter_map(|t| self.granted_entry(&catalog, &caller.grant.server, t).ok())
            .map(|e| mcphost_pb::ToolDescription {
                name: e.tool.clone(),
                description: e.description.clone(),
                input_schema_json: Value::Object((*e.schema).clone()).to_string(),
            })
            .collect()
    }
}
