//! The two-tool bridge served to fleet members: `clankie_tools` and
//! `clankie_call`. Each MCP request was admitted by the HTTP middleware; the
//! handler forwards it to mcp-host with the admission ticket and the
//! request's remaining budget as the gRPC deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clankie_proto::mcphost::v1 as mpb;
use clankie_runtime::{ClankieError, ErrorCode, grpc};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_stream::StreamExt as _;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::{Admitted, Shared};

pub const TOOLS: &str = "clankie_tools";
pub const CALL: &str = "clankie_call";
pub const REPORT: &str = "message_clankie";
pub const PEERS: &str = "list_fleet_seats";
pub const PEER: &str = "message_peer";
pub const SUBMIT: &str = "submit_for_review";
pub const CANDIDATE: &str = "review_candidate";
pub const VERDICT: &str = "review_verdict";
pub const GET_WAKE: &str = "get_wake";
pub const SCHEDULE_WAKE: &str = "schedule_wake";

#[derive(Clone)]
pub struct Bridge {
    shared: Arc<Shared>,
}

impl Bridge {
    pub fn new(shared: Arc<Shared>) -> Self {
        Bridge { shared }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsArgs {
    query: Option<String>,
    names: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CallArgs {
    name: Option<String>,
    arguments: Option<Value>,
    receipt_id: Option<String>,
    #[serde(default)]
    background: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReportArgs {
    text: String,
    receipt_id: Option<String>,
}

/// `message_clankie`, offered to seats in panes (never to bearer links).
pub fn report_definition() -> Tool {
    let tool = json!({
        "name": REPORT,
        "description": "Report to the lead that hired this seat (progress, a question, done). \
            It arrives in the lead's conversation as your agent output, not as an instruction; \
            you cannot choose another recipient. A repeated receiptId returns the original \
            delivery and sends nothing new.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "text": { "type": "string", "minLength": 1, "maxLength": 32768 },
                "receiptId": { "type": "string", "maxLength": 128, "description": "Chosen by the bridge before sending; reuse it only to read the original delivery." }
            },
            "required": ["text"],
            "additionalProperties": false
        }
    });
    serde_json::from_value(tool).unwrap_or_else(|_| Tool::default())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PeersArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PeerArgs {
    seat: String,
    text: String,
    receipt_id: Option<String>,
}

/// `list_fleet_seats` and `message_peer`, offered to seats while
/// fleet.peerMessages is on.
pub fn peer_definitions() -> Vec<Tool> {
    let tools = json!([
        {
            "name": PEERS,
            "description": "List the current seats of your own fleet (yourself included as `self`), \
                with each seat's id and exact binding. Use a returned seatId with message_peer.",
            "inputSchema": { "type": "object", "properties": {}, "additionalProperties": false }
        },
        {
            "name": PEER,
            "description": "Send a message to another current seat of your fleet. It arrives as your \
                agent output, never as an instruction. While an earlier message to that seat is \
                unresolved, this returns its receipt and sends nothing; nothing is ever resent.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "seat": { "type": "string", "description": "A seatId from list_fleet_seats." },
                    "text": { "type": "string", "minLength": 1, "maxLength": 32768 },
                    "receiptId": { "type": "string", "maxLength": 128 }
                },
                "required": ["seat", "text"],
                "additionalProperties": false
            }
        }
    ]);
    serde_json::from_value(tools).unwrap_or_default()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CandidateArgs {
    candidate_id: String,
}

/// The landing review tools, offered to seats whose project names a
/// standing reviewer. `submit_for_review` is carried out by the bridge,
/// which reads the change from the checkout it names.
pub fn review_definitions() -> Vec<Tool> {
    let tools = json!([
        {
            "name": SUBMIT,
            "description": "Submit the exact committed change of a checkout for landing review: \
                `git diff --binary` from the merge base with origin/main (or `base`) to HEAD of the \
                absolute checkout you name (resolved to its work-tree root; never the bridge's own \
                folder). The result echoes checkout, HEAD, base and patch-id.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "checkout": { "type": "string", "description": "Absolute path inside the git checkout." },
                    "summary": { "type": "string", "minLength": 1 },
                    "issue": { "type": "string" },
                    "evidence": { "type": "string" },
                    "base": { "type": "string", "description": "A commit to diff from instead of the merge base with origin/main." }
                },
                "required": ["checkout", "summary"],
                "additionalProperties": false
            }
        },
        {
            "name": CANDIDATE,
            "description": "Read a review candidate: its record and the stored patch (author and the project's reviewer).",
            "inputSchema": {
                "type": "object",
                "properties": { "candidateId": { "type": "string" } },
                "required": ["candidateId"],
                "additionalProperties": false
            }
        },
        {
            "name": VERDICT,
            "description": "Record your verdict on a candidate you read: approve, or changes with at least one \
                concrete finding. Name the patchId you read; the author cannot decide.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "candidateId": { "type": "string" },
                    "patchId": { "type": "string" },
                    "verdict": { "type": "string", "enum": ["approve", "changes"] },
                    "findings": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "text": { "type": "string", "minLength": 1 },
                                "file": { "type": "string" },
                                "line": { "type": "integer", "minimum": 0 }
                            },
                            "required": ["text"],
                            "additionalProperties": false
                        }
                    },
                    "summary": { "type": "string" }
                },
                "required": ["candidateId", "patchId", "verdict"],
                "additionalProperties": false
            }
        }
    ]);
    serde_json::from_value(tools).unwrap_or_default()
}

/// The lead's wake tools, offered to a seat that holds a lead hire.
pub fn lead_definitions() -> Vec<Tool> {
    let tools = json!([
        {
            "name": GET_WAKE,
            "description": "Read the autonomy switch, your scheduled self-wakes, the next Auto round \
                and when your last round wake was accepted.",
            "inputSchema": { "type": "object", "properties": {}, "additionalProperties": false }
        },
        {
            "name": SCHEDULE_WAKE,
            "description": "Schedule a self-wake: a wake message to your own conversation at a time \
                (ms since the epoch, at most 30 days ahead). The autonomy switch stops it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "atMs": { "type": "integer", "minimum": 0 },
                    "note": { "type": "string", "maxLength": 2048 }
                },
                "required": ["atMs"],
                "additionalProperties": false
            }
        }
    ]);
    serde_json::from_value(tools).unwrap_or_default()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScheduleArgs {
    at_ms: i64,
    #[serde(default)]
    note: String,
}

fn is_seat(a: &Admitted) -> bool {
    a.principal.mode == clankie_proto::common::v1::AdmissionMode::Local as i32
        && !a.principal.pane_id.is_empty()
}

/// The `_meta` key carrying the catalog revision on `clankie_tools`, so a
/// bridge sees a changed definition whenever the revision changes.
pub const REVISION_META: &str = "clankie/catalogRevision";

/// The two tool definitions; `connected` names the accounts verified now.
pub fn tool_definitions(connected: &[String], revision: u64) -> Vec<Tool> {
    let now = if connected.is_empty() {
        "none".to_string()
    } else {
        connected.join(", ")
    };
    let tools = json!([
        {
            "name": TOOLS,
            "_meta": { (REVISION_META): revision.to_string() },
            "description": format!(
                "Search Clankie's connected MCP tools. {{query}} returns at most 20 qualified names \
                 (<account>_<tool>) with one-line descriptions; {{names}} returns at most 10 full \
                 input schemas. Discover a schema before calling it with clankie_call. \
                 Connected now: {now}."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "Words to search names and descriptions for; omit for the first page." },
                    "names": { "type": "array", "items": { "type": "string" }, "maxItems": 10, "description": "Qualified names whose full input schemas to return." }
                },
                "additionalProperties": false
            }
        },
        {
            "name": CALL,
            "description": "Call one connected tool by its qualified name with arguments matching its schema, \
                or reconcile an earlier call with {receiptId} alone (never dispatches). Results carry a \
                receiptId and an outcome: ok, error, or uncertain (the deadline passed after dispatch: the \
                call may have applied; reconcile by receiptId, never repeat it).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "Qualified tool name from clankie_tools." },
                    "arguments": { "type": "object", "description": "Arguments matching the tool's input schema." },
                    "receiptId": { "type": "string", "description": "Alone: read that receipt. With name: use this id for the new call's receipt." },
                    "background": { "type": "boolean", "description": "Marks a call made outside an interactive turn." }
                },
                "anyOf": [ { "required": ["name"] }, { "required": ["receiptId"] } ],
                "additionalProperties": false
            }
        }
    ]);
    serde_json::from_value(tools).unwrap_or_default()
}

fn refused(e: &ClankieError) -> CallToolResult {
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

/// A refusal of a dispatch that names the receipt id the call would have
/// had: nothing was dispatched under it, so the same id may be used again.
fn with_receipt(e: ClankieError, receipt_id: &str) -> ClankieError {
    let mut details = e.details_json().unwrap_or_else(|| json!({}));
    if let Some(d) = details.as_object_mut() {
        d.insert("receiptId".into(), json!(receipt_id));
    }
    e.with_details(details)
}

/// The answer for a dispatch whose request left but whose verdict never came
/// back (a reset, a timeout, a service dying): it may have applied.
pub(crate) fn lost_after_forward(receipt_id: &str) -> Value {
    json!({
        "receiptId": receipt_id,
        "outcome": "uncertain",
        "detail": "the answer was lost after the request was forwarded; it may have applied: reconcile by this receiptId, never repeat it under a new id",
    })
}

/// A call's answer from mcp-host, as the member sees it.
fn call_result(result: mpb::CallResult) -> CallToolResult {
    let upstream: Value = if result.result_json.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&result.result_json).unwrap_or(Value::Null)
    };
    let mut body = json!({
        "receiptId": result.receipt_id,
        "outcome": result.outcome,
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
    if result.outcome == "error" {
        CallToolResult::structured_error(body)
    } else {
        CallToolResult::structured(body)
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

struct Budget(Instant, Duration);

impl Budget {
    fn request<T>(&self, msg: T, ticket: &str) -> Result<tonic::Request<T>, ClankieError> {
        let left = self.1.saturating_sub(self.0.elapsed());
        if left < Duration::from_millis(50) {
            return Err(ErrorCode::DeadlineExceeded.err("the request's budget is spent"));
        }
        let mut req = tonic::Request::new(msg);
        req.set_timeout(left);
        grpc::set_ticket(&mut req, ticket);
        Ok(req)
    }
}

fn status(s: tonic::Status) -> ClankieError {
    if !ClankieError::is_verdict(&s) && s.code() != tonic::Code::DeadlineExceeded {
        return ErrorCode::ServiceUnavailable
            .err("a fleet service is unavailable right now; retry shortly");
    }
    ClankieError::from_status(&s)
}

impl Bridge {
    async fn get_wake(
        &self,
        a: &Admitted,
        budget: &Budget,
    ) -> Result<CallToolResult, ClankieError> {
        let w = self
            .shared
            .auto
            .clone()
            .get_wake(budget.request(clankie_proto::auto::v1::GetWakeRequest {}, &a.ticket)?)
            .await
            .map_err(status)?
            .into_inner();
        Ok(CallToolResult::structured(json!({
            "switchOn": w.switch_on,
            "conversationId": w.conversation_id,
            "nextRoundMs": (w.next_round_ms > 0).then_some(w.next_round_ms),
            "lastWakeAtMs": (w.last_wake_at_ms > 0).then_some(w.last_wake_at_ms),
            "scheduled": w.scheduled.iter().map(|s| json!({
                "wakeId": s.wake_id, "atMs": s.at_ms, "note": s.note,
            })).collect::<Vec<_>>(),
        })))
    }

    async fn schedule_wake(
        &self,
        a: &Admitted,
        budget: &Budget,
        args: ScheduleArgs,
    ) -> Result<CallToolResult, ClankieError> {
        let w = self
            .shared
            .auto
            .clone()
            .schedule_wake(budget.request(
                clankie_proto::auto::v1::ScheduleWakeRequest {
                    at_ms: args.at_ms,
                    note: args.note,
                },
                &a.ticket,
            )?)
            .await
            .map_err(status)?
            .into_inner();
        Ok(CallToolResult::structured(json!({
            "wakeId": w.wake_id, "conversationId": w.conversation_id, "atMs": w.at_ms, "note": w.note,
        })))
    }

    async fn report(
        &self,
        a: &Admitted,
        budget: &Budget,
        args: ReportArgs,
    ) -> Result<CallToolResult, ClankieError> {
        if !is_seat(a) {
            return Err(ErrorCode::LocalProcessMembershipRequired
                .err("message_clankie needs a seat in a linked pane"));
        }
        let receipt_id = args
            .receipt_id
            .unwrap_or_else(|| format!("rpt_{}", uuid::Uuid::new_v4().simple()));
        if receipt_id.len() > clankie_runtime::limits::field::RECEIPT_ID {
            return Err(ErrorCode::InvalidArgument.err(clankie_runtime::limits::RECEIPT_ID_RULE));
        }
        let req = budget.request(
            clankie_proto::mailbox::v1::ReportRequest {
                receipt_id: receipt_id.clone(),
                text: args.text,
                kind: "message".into(),
            },
            &a.ticket,
        )?;
        let resp = match self.shared.mailbox.clone().report(req).await {
            Ok(r) => r.into_inner(),
            Err(s) if ClankieError::is_verdict(&s) => {
                return Err(with_receipt(ClankieError::from_status(&s), &receipt_id));
            }
            Err(_) => return Ok(CallToolResult::structured(lost_after_forward(&receipt_id))),
        };
        Ok(CallToolResult::structured(json!({
            "receiptId": resp.receipt_id,
            "delivered": true,
            "replayed": resp.replayed,
        })))
    }

    async fn tools(
        &self,
        a: &Admitted,
        budget: &Budget,
        args: ToolsArgs,
    ) -> Result<Value, ClankieError> {
        let mut mcp = self.shared.mcp.clone();
        use clankie_runtime::limits::field;
        if let Some(names) = args.names.filter(|n| !n.is_empty()) {
            if names.len() > 10 {
                return Err(ErrorCode::InvalidArgument.err("names selects at most 10 tools"));
            }
            if names.iter().any(|n| n.len() > field::TOOL_NAME) {
                return Err(ErrorCode::InvalidArgument
                    .err(format!("a tool name is at most {} bytes", field::TOOL_NAME)));
            }
            let resp = mcp
                .describe_tools(budget.request(mpb::DescribeToolsRequest { names }, &a.ticket)?)
                .await
                .map_err(status)?
                .into_inner();
            let tools: Vec<Value> = resp
                .tools
                .into_iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": serde_json::from_str::<Value>(&t.input_schema_json).unwrap_or(Value::Null),
                    })
                })
                .collect();
            return Ok(json!({ "revision": resp.revision.to_string(), "tools": tools }));
        }
        let query = args.query.unwrap_or_default();
        if query.len() > field::SEARCH_QUERY {
            return Err(ErrorCode::InvalidArgument.err(format!(
                "a search query is at most {} bytes",
                field::SEARCH_QUERY
            )));
        }
        let resp = mcp
            .search_tools(budget.request(mpb::SearchToolsRequest { query, limit: 0 }, &a.ticket)?)
            .await
            .map_err(status)?
            .into_inner();
        let tools: Vec<Value> = resp
            .tools
            .into_iter()
            .map(|t| json!({ "name": t.name, "description": t.description }))
            .collect();
        Ok(json!({
            "revision": resp.revision.to_string(),
            "tools": tools,
            "totalMatches": resp.total_matches,
        }))
    }

    async fn call(
        &self,
        a: &Admitted,
        budget: &Budget,
        args: CallArgs,
    ) -> Result<CallToolResult, ClankieError> {
        use clankie_runtime::limits;
        if let Some(id) = &args.receipt_id
            && !limits::receipt_id_ok(id)
        {
            return Err(ErrorCode::InvalidArgument.err(limits::RECEIPT_ID_RULE));
        }
        let mut mcp = self.shared.mcp.clone();
        let Some(name) = args.name else {
            let Some(receipt_id) = args.receipt_id else {
                return Err(
                    ErrorCode::InvalidArgument.err("give a tool name, or a receiptId to reconcile")
                );
            };
            // Reconciling only reads: a lost answer is simply unavailable.
            let result = mcp
                .get_receipt(budget.request(mpb::GetReceiptRequest { receipt_id }, &a.ticket)?)
                .await
                .map_err(status)?
                .into_inner();
            return Ok(call_result(result));
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
        let receipt_id = args
            .receipt_id
            .unwrap_or_else(|| format!("rcpt_{}", uuid::Uuid::new_v4().simple()));
        let req = mpb::CallToolRequest {
            name: name.clone(),
            arguments_json: arguments.to_string(),
            receipt_id: receipt_id.clone(),
            background: args.background,
        };
        let req = budget
            .request(req, &a.ticket)
            .map_err(|e| with_receipt(e, &receipt_id))?;
        match mcp.call_tool(req).await {
            Ok(result) => Ok(call_result(result.into_inner())),
            // A reason on the status: mcp-host refused before dispatch.
            Err(s) if ClankieError::is_verdict(&s) => {
                Err(with_receipt(ClankieError::from_status(&s), &receipt_id))
            }
            // The request left and no verdict came back (a reset, a
            // timeout, the host dying): it may have been dispatched.
            Err(s) => {
                tracing::info!(grpc = ?s.code(), "bridge.call.uncertain");
                let mut body = lost_after_forward(&receipt_id);
                body["name"] = json!(name);
                body["result"] = Value::Null;
                body["fromReceipt"] = json!(false);
                Ok(CallToolResult::structured(body))
            }
        }
    }

    /// The catalog's revision and connected accounts right now (the last
    /// seen ones if mcp-host cannot answer).
    async fn catalog_now(&self, a: &Admitted, budget: &Budget) -> mpb::CatalogInfo {
        let req = match budget.request(mpb::CatalogRequest {}, &a.ticket) {
            Ok(r) => r,
            Err(_) => return self.shared.catalog.borrow().clone(),
        };
        match self.shared.mcp.clone().catalog(req).await {
            Ok(c) => c.into_inner(),
            Err(_) => self.shared.catalog.borrow().clone(),
        }
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
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
        let span = tracing::info_span!("bridge.list_tools");
        clankie_runtime::telemetry::adopt_http_parent(&span, &headers);
        async move {
            let mut tools = if a.tools_on {
                let budget = Budget(Instant::now(), self.shared.request_budget);
                let info = self.catalog_now(&a, &budget).await;
                tool_definitions(&info.connected, info.revision)
            } else {
                Vec::new()
            };
            // Reports are the seat's own channel, apart from fleet.tools.
            if is_seat(&a) {
                tools.push(report_definition());
                if self.shared.settings.borrow().peer_messages {
                    tools.extend(peer_definitions());
                }
                // Review tools only when the seat's project has a standing
                // reviewer (and the mailbox answers).
                let mut req = tonic::Request::new(clankie_proto::mailbox::v1::SeatToolsRequest {});
                req.set_timeout(Duration::from_secs(5));
                clankie_runtime::grpc::set_ticket(&mut req, &a.ticket);
                if let Ok(seat) = self.shared.mailbox.clone().seat_tools(req).await {
                    let seat = seat.into_inner();
                    if seat.reviews {
                        tools.extend(review_definitions());
                    }
                    if seat.lead {
                        tools.extend(lead_definitions());
                    }
                }
            }
            serde_json::from_value(json!({ "tools": tools }))
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
        let span = tracing::info_span!("bridge.call_tool", tool = %request.name);
        clankie_runtime::telemetry::adopt_http_parent(&span, &headers);
        let budget = Budget(Instant::now(), self.shared.request_budget);
        async move {
            let args = Value::Object(request.arguments.unwrap_or_default());
            let result =
                match request.name.as_ref() {
                    TOOLS => match serde_json::from_value::<ToolsArgs>(args) {
                        Ok(args) => self
                            .tools(&a, &budget, args)
                            .await
                            .map(CallToolResult::structured),
                        Err(e) => Err(ErrorCode::ArgumentsInvalid
                            .err(format!("clankie_tools arguments: {e}"))),
                    },
                    CALL => {
                        match serde_json::from_value::<CallArgs>(args) {
                            Ok(args) => self.call(&a, &budget, args).await,
                            Err(e) => Err(ErrorCode::ArgumentsInvalid
                                .err(format!("clankie_call arguments: {e}"))),
                        }
                    }
                    SUBMIT => Err(ErrorCode::InvalidArgument.err(
                        "submit_for_review reads the change from your checkout: call it through \
                     `clankie mcp --fleet`, or run `clankie review submit` in your pane",
                    )),
                    CANDIDATE => match serde_json::from_value::<CandidateArgs>(args) {
                        Ok(c) if is_seat(&a) => {
                            crate::seats::review::read(&self.shared, &a, c.candidate_id)
                                .await
                                .map(CallToolResult::structured)
                        }
                        Ok(_) => Err(ErrorCode::NativeSeatRequired
                            .err("reviews need a native seat; bearer links have none")),
                        Err(e) => Err(ErrorCode::ArgumentsInvalid
                            .err(format!("review_candidate arguments: {e}"))),
                    },
                    VERDICT => {
                        match serde_json::from_value::<crate::seats::review::Verdict>(args) {
                            Ok(v) if is_seat(&a) => {
                                crate::seats::review::decide(&self.shared, &a, v)
                                    .await
                                    .map(CallToolResult::structured)
                            }
                            Ok(_) => Err(ErrorCode::NativeSeatRequired
                                .err("reviews need a native seat; bearer links have none")),
                            Err(e) => Err(ErrorCode::ArgumentsInvalid
                                .err(format!("review_verdict arguments: {e}"))),
                        }
                    }
                    GET_WAKE | SCHEDULE_WAKE if !is_seat(&a) => Err(ErrorCode::NativeSeatRequired
                        .err("the wake tools need a native lead seat; bearer links have none")),
                    GET_WAKE => self.get_wake(&a, &budget).await,
                    SCHEDULE_WAKE => match serde_json::from_value::<ScheduleArgs>(args) {
                        Ok(w) => self.schedule_wake(&a, &budget, w).await,
                        Err(e) => Err(ErrorCode::ArgumentsInvalid
                            .err(format!("schedule_wake arguments: {e}"))),
                    },
                    PEERS => match serde_json::from_value::<PeersArgs>(args) {
                        Ok(_) if is_seat(&a) => crate::seats::list_peers(&self.shared, &a)
                            .await
                            .map(CallToolResult::structured),
                        Ok(_) => Err(ErrorCode::NativeSeatRequired
                            .err("list_fleet_seats needs a native seat; bearer links have none")),
                        Err(e) => Err(ErrorCode::ArgumentsInvalid
                            .err(format!("list_fleet_seats arguments: {e}"))),
                    },
                    PEER => {
                        match serde_json::from_value::<PeerArgs>(args) {
                            Ok(_) if !is_seat(&a) => Err(ErrorCode::NativeSeatRequired
                                .err("message_peer needs a native seat; bearer links have none")),
                            Ok(p) => {
                                let receipt = p.receipt_id.unwrap_or_else(|| {
                                    format!("peer_{}", uuid::Uuid::new_v4().simple())
                                });
                                crate::seats::send_peer(&self.shared, &a, p.seat, p.text, receipt)
                                    .await
                                    .map(CallToolResult::structured)
                            }
                            Err(e) => Err(ErrorCode::ArgumentsInvalid
                                .err(format!("message_peer arguments: {e}"))),
                        }
                    }
                    REPORT => match serde_json::from_value::<ReportArgs>(args) {
                        Ok(args) => self.report(&a, &budget, args).await,
                        Err(e) => Err(ErrorCode::ArgumentsInvalid
                            .err(format!("message_clankie arguments: {e}"))),
                    },
                    other => {
                        return Err(ErrorData::invalid_params(
                            format!(
                                "unknown tool {}: this server has clankie_tools and clankie_call",
                                clankie_runtime::limits::clip(other, 64)
                            ),
                            None,
                        ));
                    }
                };
            Ok(match result {
                Ok(r) => r,
                Err(e) => refused(&e),
            }
            .into())
        }
        .instrument(span)
        .await
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

/// Sends `notifications/tools/list_changed` to every session still open.
async fn notify_all(shared: &Shared) {
    let peers: Vec<_> = {
        let mut peers = shared.peers.lock();
        peers.retain(|p| !p.is_transport_closed());
        peers.clone()
    };
    for peer in peers {
        if let Err(e) = peer.notify_tool_list_changed().await {
            tracing::debug!(error = %e, "list_changed not delivered");
        }
    }
}

/// Follows a server stream, reconnecting with backoff, until shutdown.
/// `apply` stores an item and says whether sessions must hear that their
/// tool list changed.
async fn follow<T, C, Fut>(
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    connect: C,
    apply: impl Fn(&Shared, T) -> bool,
) where
    C: Fn(Arc<Shared>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>>,
{
    let mut backoff = Duration::from_millis(100);
    loop {
        if let Ok(stream) = connect(shared.clone()).await {
            backoff = Duration::from_millis(100);
            let mut stream = stream.into_inner();
            loop {
                let item = tokio::select! {
                    i = stream.next() => i,
                    _ = shutdown.cancelled() => return,
                };
                let Some(Ok(item)) = item else { break };
                // Sessions hear of it through `announce`, coalesced.
                apply(&shared, item);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(3));
    }
}

/// How long the tool list must hold still before sessions hear it changed.
const COALESCE: Duration = Duration::from_millis(500);

/// What a session's tool list depends on.
fn listing(shared: &Shared) -> (u64, Vec<String>, i32, bool) {
    let c = shared.catalog.borrow();
    let s = shared.settings.borrow();
    (c.revision, c.connected.clone(), s.tools, s.peer_messages)
}

/// Tells every session its tool list changed, coalesced: a burst of changes
/// (accounts verifying at start, an upstream flapping) is one announcement
/// once the list holds still for [`COALESCE`], and a change undone within
/// it is none.
pub async fn announce(shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut catalog = shared.catalog.subscribe();
    let mut settings = shared.settings.subscribe();
    let mut last = listing(&shared);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            r = catalog.changed() => if r.is_err() { return },
            r = settings.changed() => if r.is_err() { return },
        }
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(COALESCE) => break,
                r = catalog.changed() => if r.is_err() { return },
                r = settings.changed() => if r.is_err() { return },
            }
        }
        let now = listing(&shared);
        if now != last {
            last = now;
            shared.announced.send_modify(|n| *n += 1);
            notify_all(&shared).await;
        }
    }
}

/// Follows mcp-host's catalog: a new revision or connected set is news.
pub async fn watch_catalog(shared: Arc<Shared>, shutdown: CancellationToken) {
    follow(
        shared,
        shutdown,
        |s| async move { s.mcp.clone().watch_catalog(mpb::CatalogRequest {}).await },
        |s, info: mpb::CatalogInfo| {
            s.catalog.send_if_modified(|cur| {
                let changed = cur.revision != info.revision || cur.connected != info.connected;
                if changed {
                    *cur = info;
                }
                changed
            })
        },
    )
    .await
}

/// Follows the admission service's settings: fleet.tools changes what every
/// session lists.
pub async fn watch_settings(shared: Arc<Shared>, shutdown: CancellationToken) {
    use clankie_proto::admission::v1 as apb;
    follow(
        shared,
        shutdown,
        |s| async move {
            s.admission
                .clone()
                .watch_settings(apb::WatchSettingsRequest {})
                .await
        },
        |s, settings: apb::FleetSettings| {
            s.settings.send_if_modified(|cur| {
                let changed =
                    cur.tools != settings.tools || cur.peer_messages != settings.peer_messages;
                if changed {
                    *cur = settings;
                }
                changed
            })
        },
    )
    .await
}
