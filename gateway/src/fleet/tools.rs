//! `clankie_tools`: search the connected tools, or describe up to ten of
//! them with their full input schemas.

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::limits::field;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::args::ToolsArgs;
use serde::Serialize;
use serde_json::Value;

use super::{Op, unanswered};
use clankie_runtime::clients::Answer as _;

use clankie_types::fleet::limits::DESCRIBED_TOOLS;

/// A page of the connected catalog, at its revision.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolPage {
    pub(crate) revision: String,
    pub(crate) tools: Vec<ToolEntry>,
    /// A search's matches in all (a description has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total_matches: Option<u32>,
}

/// One tool: its qualified name and description, and when described, its
/// input schema.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolEntry {
    pub(crate) name: String,
    pub(crate) description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_schema: Option<Value>,
}

impl Op<'_> {
    /// `clankie_tools`: names given describe them, else a search.
    pub(crate) async fn tools(&self, args: ToolsArgs) -> Result<ToolPage, ClankieError> {
        match args.names.filter(|n| !n.is_empty()) {
            Some(names) => self.describe(names).await,
            None => self.search(args.query.unwrap_or_default()).await,
        }
    }

    async fn describe(&self, names: Vec<String>) -> Result<ToolPage, ClankieError> {
        if names.len() > DESCRIBED_TOOLS {
            return Err(ErrorCode::InvalidArgument.err("names selects at most 10 tools"));
        }
        if names.iter().any(|n| n.len() > field::TOOL_NAME) {
            return Err(ErrorCode::InvalidArgument
                .err(format!("a tool name is at most {} bytes", field::TOOL_NAME)));
        }
        let req = self.request(mcphost_pb::DescribeToolsRequest { names })?;
        let resp = self
            .shared
            .mcp
            .clone()
            .describe_tools(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        let tools = resp
            .tools
            .into_iter()
            .map(|t| ToolEntry {
                input_schema: Some(
                    serde_json::from_str::<Value>(&t.input_schema_json).unwrap_or(Value::Null),
                ),
                name: t.name,
                description: t.description,
            })
            .collect();
        Ok(ToolPage {
            revision: resp.revision.to_string(),
            tools,
            total_matches: None,
        })
    }

    async fn search(&self, query: String) -> Result<ToolPage, ClankieError> {
        if query.len() > field::SEARCH_QUERY {
            return Err(ErrorCode::InvalidArgument.err(format!(
                "a search query is at most {} bytes",
                field::SEARCH_QUERY
            )));
        }
        let req = self.request(mcphost_pb::SearchToolsRequest { query, limit: 0 })?;
        let resp = self
            .shared
            .mcp
            .clone()
            .search_tools(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        let tools = resp
            .tools
            .into_iter()
            .map(|t| ToolEntry {
                name: t.name,
                description: t.description,
                input_schema: None,
            })
            .collect();
        Ok(ToolPage {
            revision: resp.revision.to_string(),
            tools,
            total_matches: Some(resp.total_matches),
        })
    }
}
