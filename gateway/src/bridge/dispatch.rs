//! A tool call, from its name to its answer: the arguments parsed into the
//! tool's type, the seat check, the forward to the service with the ticket
//! and the remaining budget, and the answer shaped for the member. Once a
//! call is forwarded, a lost verdict is `uncertain` with its receipt.

use clankie_runtime::clients::Call;
use clankie_types::fleet::outcome::lost_after_forward;
use clankie_types::fleet::{CallMeta, FleetTool, Outcome, ReceiptId, ReceiptKind};

use super::*;

pub(super) fn refused(e: &ClankieError) -> CallToolResult {
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
pub(super) fn with_receipt(e: ClankieError, receipt_id: &str) -> ClankieError {
    let mut details = e.details_json().unwrap_or_else(|| json!({}));
    if let Some(d) = details.as_object_mut() {
        d.insert("receiptId".into(), json!(receipt_id));
    }
    e.with_details(details)
}

/// A call's answer from mcp-host, as the member sees it: the upstream's own
/// result as it was sent (content blocks, `structuredContent`, `isError`,
/// `_meta`), with the receipt and outcome added to `_meta`. With no
/// upstream result to pass on (uncertain, trimmed, a protocol error), the
/// structured content is clankie's account of the call instead.
pub(super) fn call_result(result: mpb::CallResult) -> CallToolResult {
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
    let mut out = passed.unwrap_or_else(|| {
        let mut body = json!({
            "receiptId": result.receipt_id,
            "outcome": Outcome::from_wire(result.outcome),
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
        if Outcome::from_wire(result.outcome) == Some(Outcome::Error) {
            CallToolResult::structured_error(body)
        } else {
            CallToolResult::structured(body)
        }
    });
    let account = CallMeta {
        receipt_id: result.receipt_id,
        outcome: Outcome::from_wire(result.outcome),
        name: result.name,
        from_receipt: result.from_receipt,
        detail: result.detail,
        trimmed: result.trimmed,
        envelope: enveloped,
    };
    account.write(out.meta.get_or_insert_with(Default::default));
    out
}

/// The start and the whole budget of one request.
pub(super) struct Budget(pub(super) Instant, pub(super) Duration);

impl Budget {
    /// What is left of the budget, refused when too little is left for a
    /// forward to be worth it.
    pub(super) fn left(&self) -> Result<Duration, ClankieError> {
        let left = self.1.saturating_sub(self.0.elapsed());
        if left < Duration::from_millis(50) {
            return Err(ErrorCode::DeadlineExceeded.err("the request's budget is spent"));
        }
        Ok(left)
    }

    fn request<T>(&self, msg: T, ticket: &str) -> Result<tonic::Request<T>, ClankieError> {
        Ok(Call::new(msg)
            .timeout(self.left()?)
            .ticket(ticket)
            .request())
    }
}

pub(super) fn status(s: tonic::Status) -> ClankieError {
    if !ClankieError::is_verdict(&s) && s.code() != tonic::Code::DeadlineExceeded {
        return ErrorCode::ServiceUnavailable
            .err("a fleet service is unavailable right now; retry shortly");
    }
    ClankieError::from_status(&s)
}

/// A tool's arguments in its own type; arguments that do not fit are
/// refused naming the tool.
pub(super) fn parse<A: serde::de::DeserializeOwned>(
    tool: &str,
    args: Value,
) -> Result<A, ClankieError> {
    serde_json::from_value(args)
        .map_err(|e| ErrorCode::ArgumentsInvalid.err(format!("{tool} arguments: {e}")))
}

/// What the wake tools need.
const WAKE_SEAT: &str = "the wake tools need a native lead seat";

/// Seat tools need a native seat (a pane); bearer links have none.
fn seat(a: &Admitted, needs: &str) -> Result<(), ClankieError> {
    if is_seat(a) {
        Ok(())
    } else {
        Err(ErrorCode::NativeSeatRequired.err(format!("{needs}; bearer links have none")))
    }
}

impl Bridge {
    /// Runs the tool `name`; `None` when this server has no such tool.
    pub(super) async fn dispatch(
        &self,
        a: &Admitted,
        budget: &Budget,
        name: &str,
        args: Value,
    ) -> Option<Result<CallToolResult, ClankieError>> {
        let shared = &self.shared;
        let tool = FleetTool::parse(name)?;
        Some(match tool {
            FleetTool::Tools => {
                async {
                    let args = parse(TOOLS, args)?;
                    self.tools(a, budget, args)
                        .await
                        .map(CallToolResult::structured)
                }
                .await
            }
            FleetTool::Call => {
                async {
                    let args = parse(CALL, args)?;
                    self.call(a, budget, args, None).await
                }
                .await
            }
            FleetTool::Submit => Err(ErrorCode::InvalidArgument.err(
                "submit_for_review reads the change from your checkout: call it through \
                 `clankie mcp --fleet`, or run `clankie review submit` in your pane",
            )),
            FleetTool::Candidate => {
                async {
                    let c: CandidateArgs = parse(CANDIDATE, args)?;
                    seat(a, "reviews need a native seat")?;
                    crate::seats::review::read(shared, a, c.candidate_id)
                        .await
                        .map(CallToolResult::structured)
                }
                .await
            }
            FleetTool::Verdict => {
                async {
                    let v = parse(VERDICT, args)?;
                    seat(a, "reviews need a native seat")?;
                    crate::seats::review::decide(shared, a, v)
                        .await
                        .map(CallToolResult::structured)
                }
                .await
            }
            FleetTool::GetWake => {
                async {
                    seat(a, WAKE_SEAT)?;
                    self.get_wake(a, budget).await
                }
                .await
            }
            FleetTool::ScheduleWake => {
                async {
                    seat(a, WAKE_SEAT)?;
                    let w = parse(SCHEDULE_WAKE, args)?;
                    self.schedule_wake(a, budget, w).await
                }
                .await
            }
            FleetTool::Peers => {
                async {
                    let _: PeersArgs = parse(PEERS, args)?;
                    seat(a, "list_fleet_seats needs a native seat")?;
                    crate::seats::list_peers(shared, a)
                        .await
                        .map(CallToolResult::structured)
                }
                .await
            }
            FleetTool::Peer => {
                async {
                    let p: PeerArgs = parse(PEER, args)?;
                    seat(a, "message_peer needs a native seat")?;
                    let receipt =
                        ReceiptId::given_or_mint(p.receipt_id.as_deref(), ReceiptKind::Peer)?
                            .into_string();
                    crate::seats::send_peer(shared, a, p.seat, p.text, receipt)
                        .await
                        .map(CallToolResult::structured)
                }
                .await
            }
            FleetTool::Report => {
                async {
                    let args = parse(REPORT, args)?;
                    self.report(a, budget, args).await
                }
                .await
            }
        })
    }

    pub(super) async fn get_wake(
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

    pub(super) async fn schedule_wake(
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

    pub(super) async fn report(
        &self,
        a: &Admitted,
        budget: &Budget,
        args: ReportArgs,
    ) -> Result<CallToolResult, ClankieError> {
        if !is_seat(a) {
            return Err(ErrorCode::LocalProcessMembershipRequired
                .err("message_clankie needs a seat in a linked pane"));
        }
        let receipt_id = ReceiptId::given_or_mint(args.receipt_id.as_deref(), ReceiptKind::Report)?
            .into_string();
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

    pub(super) async fn tools(
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

    pub(super) async fn call(
        &self,
        a: &Admitted,
        budget: &Budget,
        args: CallArgs,
        hearing: Option<super::hear::Hearing>,
    ) -> Result<CallToolResult, ClankieError> {
        use clankie_runtime::limits;
        if let Some(id) = &args.receipt_id {
            ReceiptId::parse(id)?;
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
        let receipt_id =
            ReceiptId::given_or_mint(args.receipt_id.as_deref(), ReceiptKind::Call)?.into_string();
        let req = mpb::CallToolRequest {
            name: name.clone(),
            arguments_json: arguments.to_string(),
            receipt_id: receipt_id.clone(),
            background: args.background,
            ..Default::default()
        };
        let req = budget
            .request(req, &a.ticket)
            .map_err(|e| with_receipt(e, &receipt_id))?;
        match super::hear::call_tool(&mut mcp, req, hearing).await {
            Ok(result) => Ok(call_result(result)),
            // A reason on the status: mcp-host refused before dispatch.
            Err(s) if ClankieError::is_verdict(&s) => {
                Err(with_receipt(ClankieError::from_status(&s), &receipt_id))
            }
            // The request left and no verdict came back (a reset, a
            // timeout, the host dying): it may have been dispatched.
            Err(s) => {
                tracing::info!(grpc = ?s.code(), "bridge.call.uncertain");
                let lost = lost_after_forward(&receipt_id);
                Ok(call_result(mpb::CallResult {
                    receipt_id,
                    outcome: Outcome::Uncertain.wire(),
                    name,
                    detail: lost["detail"].as_str().unwrap_or_default().into(),
                    ..Default::default()
                }))
            }
        }
    }

    /// The catalog's revision and connected accounts right now (the last
    /// seen ones if mcp-host cannot answer).
    pub(super) async fn catalog_now(&self, a: &Admitted, budget: &Budget) -> mpb::CatalogInfo {
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
