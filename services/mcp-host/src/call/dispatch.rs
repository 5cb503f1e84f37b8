//! The durable receipt, the task that runs the call and settles it, and the
//! answer the caller gets: the outcome, or `uncertain` with the receipt once
//! the budget is spent. Past the durable receipt the call was dispatched:
//! every answer carries its receipt, and none is a refusal.

use clankie_runtime::clients::{Answer as _, Call, Unanswered};
use std::time::Duration;

use clankie_proto::common::v1::Principal;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::{ClankieError, now_ms};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::target::Target;
use super::{Ask, Plan};
use crate::receipts::{self, Begin, Outcome, Record};
use crate::relay::Listen;
use crate::{
    COMPLETION_LIFETIME, McpHost, REPLY_MARGIN, Requester, audit, audit_text, catalog, owner_of,
    result_pb, tracker,
};

/// What a dispatched call settles to: its outcome, body and detail.
type Settlement = (Outcome, Option<Value>, Option<String>);

/// The settled record, or why its outcome could not be recorded.
type Settled = oneshot::Receiver<Result<Record, ClankieError>>;

impl McpHost {
    /// The record a call's receipt starts as.
    pub(crate) fn record(
        &self,
        who: &Requester,
        principal: &Principal,
        entry: &catalog::Entry,
        ask: &Ask,
        background: bool,
    ) -> Record {
        Record {
            receipt_id: ask.receipt_id.clone(),
            seq: 0,
            fleet: principal.fleet_id.clone(),
            principal: audit_text(who, principal),
            owner: owner_of(who, principal),
            name: entry.qualified.clone(),
            account: entry.account.clone(),
            account_generation: entry.generation,
            arguments_sha256: ask.args_sha.clone(),
            background,
            status: receipts::Status::Dispatched,
            outcome: None,
            result: None,
            detail: None,
            dispatched_at_ms: now_ms(),
            settled_at_ms: None,
            trimmed: false,
            journal: ask.journal.clone(),
        }
    }

    /// Makes the receipt durable. A call that is not dispatched (the store
    /// refused, or the id raced to another call) gives its budget back.
    pub(crate) async fn begin(
        &self,
        record: &Record,
        counted: Option<tracker::Counted>,
    ) -> Result<Begin, ClankieError> {
        let started = std::time::Instant::now();
        let begun = self.inner.receipts.begin(record.clone()).await;
        crate::metrics::commit("begin", matches!(begun, Ok(Begin::Durable)), started);
        if !matches!(begun, Ok(Begin::Durable))
            && let Some(c) = counted
        {
            self.inner.budgets.refund(c);
        }
        begun
    }

    /// Runs the call in its own task, so it keeps its completion lifetime
    /// and settles the receipt even when the caller stops waiting.
    pub(crate) fn dispatch(
        &self,
        target: Target,
        entry: &catalog::Entry,
        plan: Option<&Plan>,
        ask: &Ask,
        record: &Record,
        attached: Attached,
    ) -> Settled {
        let Attached { stops, listen } = attached;
        self.inner.audit.record(&audit::Event {
            event: "dispatch",
            principal: &record.principal,
            account: &entry.account,
            tool: &entry.tool,
            receipt_id: &record.receipt_id,
            outcome: None,
            trace_id: clankie_runtime::telemetry::current_trace_id(),
        });
        let history = matches!(
            plan,
            Some(Plan {
                backend: tracker::Backend::Linear { history: true },
                ..
            })
        );
        let params = {
            let mut p = rmcp::model::CallToolRequestParams::new(entry.tool.clone());
            let mut a = ask.args.as_object().cloned();
            if plan.is_some()
                && let Some(a) = a.as_mut()
            {
                // Routing-only arguments never reach Linear.
                a.remove("repo");
                a.remove("linearHistory");
            }
            p.arguments = a;
            p
        };
        // The upstream hop's own span; a stdio upstream hears it in
        // `_meta`, an HTTP one also as headers (`TraceHeaders`).
        let span = tracing::info_span!(
            "mcp.upstream_call",
            account = %entry.account,
            tool = %entry.tool,
            otel.kind = "client"
        );
        let mut params = params;
        clankie_runtime::telemetry::inject_meta(
            &span,
            params.meta.get_or_insert_with(Default::default),
        );
        let relay = self.inner.accounts.relay();
        // Registered before the task starts, so a cancel that comes at any
        // point from here on finds the call.
        let cancel = self.inner.cancels.watch(&record.receipt_id);
        let host = self.clone();
        let (tx, rx) = oneshot::channel();
        let store = self.inner.receipts.clone();
        let audit = self.inner.audit.clone();
        let tracker_client = self.inner.tracker.clone();
        let invoke_auth = self.inner.owner_token.clone();
        let principal = record.principal.clone();
        let account = entry.account.clone();
        let tool = entry.tool.clone();
        let rid = record.receipt_id.clone();
        tokio::spawn(
            async move {
                let started = std::time::Instant::now();
                // An upstream call stays in flight (holding its account's
                // close) until its receipt is settled.
                let ((outcome, body, detail), _in_flight) = match target {
                    // The final dispatch boundary: a grant revoked during the
                    // awaited setup stops the call here, before anything leaves.
                    _ if let Some(why) = stops.fired() => (not_dispatched(why), None),
                    _ if cancel.is_cancelled() => (not_dispatched(Stopped::Cancelled), None),
                    Target::Store(invoke) => (
                        invoke_store(tracker_client, invoke, &invoke_auth).await,
                        None,
                    ),
                    Target::Upstream(peer, guard) => {
                        let heard = relay.open(&account, &rid, listen);
                        (
                            invoke_upstream(peer, params, heard, &cancel).await,
                            Some(guard),
                        )
                    }
                };
                let body = if history {
                    body.map(mark_history)
                } else {
                    body
                };
                crate::metrics::call(&account, &tool, outcome.as_str(), started);
                // Recorded now, durable with the next commit: the reply does
                // not wait for it (a crash before then reopens the receipt as
                // uncertain).
                let settled = store.settle(&rid, outcome, body, detail);
                host.inner.cancels.done(&rid);
                audit.record(&audit::Event {
                    event: "settle",
                    principal: &principal,
                    account: &account,
                    tool: &tool,
                    receipt_id: &rid,
                    outcome: Some(outcome.as_str()),
                    trace_id: None,
                });
                let _ = tx.send(settled);
            }
            .instrument(span),
        );
        rx
    }

    /// The settled outcome, if it is recorded within `budget` (less the
    /// reply margin); otherwise `uncertain`, naming the receipt. The outcome
    /// is made durable by the next commit, after this reply.
    pub(crate) async fn answer(
        &self,
        settled: Settled,
        record: Record,
        budget: Duration,
    ) -> mcphost_pb::CallResult {
        let wait = budget.saturating_sub(REPLY_MARGIN);
        let detail = match tokio::time::timeout(wait, settled).await {
            Ok(Ok(Ok(settled))) => return result_pb(&settled, false),
            // The outcome is known but could not be recorded: the honest
            // answer is uncertain.
            Ok(Ok(Err(e))) => format!(
                "the call ran, but its outcome could not be recorded ({}); reconcile with clankie_call({{receiptId}})",
                e.code.as_str()
            ),
            Ok(Err(_)) | Err(_) => {
                "the deadline passed after dispatch: the call may have applied; reconcile with clankie_call({receiptId})"
                    .into()
            }
        };
        let mut r = self
            .inner
            .receipts
            .get(&record.receipt_id)
            .unwrap_or(record);
        r.detail = Some(detail);
        r.result = None;
        let mut out = result_pb(&r, false);
        out.outcome = Outcome::Uncertain.wire();
        out
    }
}

/// What a caller attached to its call: what stops it before dispatch, and
/// what it hears while it runs.
pub(crate) struct Attached {
    pub stops: Stops,
    pub listen: Listen,
}

/// What stops a call at its dispatch boundary, checked after every awaited
/// step of its setup: its grant's revocation, and its caller going away (a
/// `notifications/cancelled`, a dropped request).
#[derive(Default)]
pub(crate) struct Stops {
    pub revoked: Option<CancellationToken>,
    pub caller_gone: Option<CancellationToken>,
}

/// Why a call stopped before it was sent.
#[derive(Clone, Copy)]
enum Stopped {
    Revoked,
    Cancelled,
}

impl Stops {
    fn fired(&self) -> Option<Stopped> {
        let fired =
            |t: &Option<CancellationToken>| t.as_ref().is_some_and(CancellationToken::is_cancelled);
        if fired(&self.revoked) {
            Some(Stopped::Revoked)
        } else if fired(&self.caller_gone) {
            Some(Stopped::Cancelled)
        } else {
            None
        }
    }
}

/// Tells an upstream its request `id` is cancelled (MCP
/// `notifications/cancelled`); a connection already gone hears nothing.
///
/// Sent as a plain notification with the standard method: rmcp's own
/// `notify_cancelled` also drops the waiter for the request, so an answer
/// the upstream still sends (one that does not implement cancellation)
/// would be thrown away, and that answer is what settles the receipt.
async fn tell_cancelled(peer: &rmcp::Peer<rmcp::RoleClient>, id: &rmcp::model::RequestId) {
    let notice = rmcp::model::CustomNotification::new(
        "notifications/cancelled",
        Some(serde_json::json!({ "requestId": id, "reason": "the caller cancelled" })),
    );
    let _ = peer
        .send_notification(rmcp::model::ClientNotification::CustomNotification(notice))
        .await;
}

/// Ends rmcp's wait for a request whose answer is no longer wanted (the
/// grace after a cancel passed): its own cancel removes the waiter, and the
/// upstream hears the cancel again, which a receiver ignores for a request
/// it already dropped.
async fn give_up(peer: &rmcp::Peer<rmcp::RoleClient>, id: rmcp::model::RequestId) {
    let why = rmcp::model::CancelledNotificationParam::new(
        Some(id),
        Some("the caller cancelled; no answer came".into()),
    );
    let _ = peer.notify_cancelled(why).await;
}

/// A call stopped at the dispatch boundary: definite, nothing sent.
fn not_dispatched(why: Stopped) -> Settlement {
    use clankie_runtime::ErrorCode;
    let (e, detail) = match why {
        Stopped::Revoked => (
            ErrorCode::GrantRevoked
                .err("the grant was revoked before this call dispatched; nothing was sent"),
            "not dispatched: the grant was revoked first",
        ),
        Stopped::Cancelled => (
            ErrorCode::InvalidArgument
                .err("the caller cancelled this call before it dispatched; nothing was sent"),
            "not dispatched: cancelled by the caller first",
        ),
    };
    (
        Outcome::Error,
        Some(tool_result(serde_json::json!({ "error": e.body() }), true)),
        Some(detail.into()),
    )
}

/// One call into the built-in tracker, as the owner's host on behalf of the
/// caller's actor.
async fn invoke_store(
    mut client: clankie_runtime::clients::TrackerClient,
    invoke: tracker_pb::InvokeRequest,
    owner_token: &str,
) -> Settlement {
    let r = Call::new(invoke)
        .timeout(COMPLETION_LIFETIME)
        .owner(owner_token)
        .request();
    match client.invoke(r).await.verdict() {
        Ok(resp) => {
            let structured: Value = serde_json::from_str(&resp.result_json).unwrap_or(Value::Null);
            (Outcome::Ok, Some(tool_result(structured, false)), None)
        }
        Err(Unanswered::Verdict(e)) => {
            // The tracker answered: nothing was written.
            (
                Outcome::Error,
                Some(tool_result(serde_json::json!({ "error": e.body() }), true)),
                None,
            )
        }
        Err(Unanswered::Lost(s)) => (
            Outcome::Uncertain,
            None,
            Some(format!(
                "the tracker connection failed after dispatch ({}); the call may have applied",
                s.message()
            )),
        ),
    }
}

/// One call to an upstream account, within the completion lifetime. The
/// call hears its progress under the token its request left with.
/// How long a cancelled call still waits for its upstream's answer: an
/// answer that comes proves what happened; none leaves it uncertain.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

async fn invoke_upstream(
    peer: rmcp::Peer<rmcp::RoleClient>,
    params: rmcp::model::CallToolRequestParams,
    mut heard: crate::relay::Registration,
    cancel: &CancellationToken,
) -> Settlement {
    use rmcp::model::{CallToolRequest, ClientRequest, ServerResult};
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let mut options = rmcp::service::PeerRequestOptions::no_options();
    options.timeout = Some(COMPLETION_LIFETIME);
    let answer = match peer.send_request_with_option(request, options).await {
        Ok(handle) => {
            heard.bind(crate::relay::token_key(&handle.progress_token));
            let id = handle.id.clone();
            let waiting = handle.await_response();
            tokio::pin!(waiting);
            tokio::select! {
                answer = &mut waiting => answer,
                _ = cancel.cancelled() => {
                    tell_cancelled(&peer, &id).await;
                    match tokio::time::timeout(CANCEL_GRACE, &mut waiting).await {
                        // The upstream's own answer proves what happened.
                        Ok(answer @ (Ok(_) | Err(rmcp::ServiceError::McpError(_)))) => answer,
                        // No answer (the request was given up here, or the
                        // grace passed): it may have applied.
                        other => {
                            if other.is_err() {
                                give_up(&peer, id).await;
                            }
                            return (
                                Outcome::Uncertain,
                                None,
                                Some("cancelled by the caller after dispatch; the upstream was told (notifications/cancelled) and sent no answer: the call may have applied".into()),
                            );
                        }
                    }
                }
            }
        }
        Err(e) => Err(e),
    };
    let answer = answer.and_then(|r| match r {
        ServerResult::CallToolResult(result) => Ok(result),
        // A server that answers `{}` ran the tool and said nothing.
        ServerResult::EmptyResult(_) => Ok(rmcp::model::CallToolResult::success(Vec::new())),
        _ => Err(rmcp::ServiceError::UnexpectedResponse),
    });
    match answer {
        Ok(result) => {
            let outcome = if result.is_error == Some(true) {
                Outcome::Error
            } else {
                Outcome::Ok
            };
            (outcome, serde_json::to_value(&result).ok(), None)
        }
        Err(rmcp::ServiceError::McpError(e)) => (
            Outcome::Error,
            Some(serde_json::json!({ "error": { "code": e.code.0, "message": e.message } })),
            Some("the upstream answered with a protocol error".to_string()),
        ),
        Err(rmcp::ServiceError::Timeout { .. }) => (
            Outcome::Uncertain,
            None,
            Some("no answer within the completion lifetime; the call may have applied".into()),
        ),
        Err(e) => (
            Outcome::Uncertain,
            None,
            Some(crate::accounts::error_text::plain(&format!(
                "the connection failed after dispatch ({e}); the call may have applied"
            ))),
        ),
    }
}

/// A tracker answer as an MCP tool result.
fn tool_result(structured: Value, is_error: bool) -> Value {
    serde_json::json!({
        "content": [{ "type": "text", "text": structured.to_string() }],
        "structuredContent": structured,
        "isError": is_error,
    })
}

/// Marks an upstream answer as the frozen Linear copy.
fn mark_history(mut result: Value) -> Value {
    if let Some(obj) = result.as_object_mut() {
        if let Some(Value::Object(sc)) = obj.get_mut("structuredContent") {
            sc.insert("linearHistory".into(), Value::Bool(true));
        }
        let note = serde_json::json!({
            "type": "text",
            "text": "Linear history: the frozen Linear copy; the live item is in the built-in tracker.",
        });
        match obj.get_mut("content") {
            Some(Value::Array(items)) => items.insert(0, note),
            _ => {
                obj.insert("content".into(), Value::Array(vec![note]));
            }
        }
        obj.insert(
            "_meta".into(),
            serde_json::json!({ "clankie/linearHistory": true }),
        );
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancelled() -> Option<CancellationToken> {
        let t = CancellationToken::new();
        t.cancel();
        Some(t)
    }

    #[test]
    fn the_boundary_stops_a_revoked_or_cancelled_call_with_nothing_sent() {
        let live = Stops {
            revoked: Some(CancellationToken::new()),
            caller_gone: Some(CancellationToken::new()),
        };
        assert!(live.fired().is_none(), "nothing fired: the call goes out");
        assert!(Stops::default().fired().is_none());

        let revoked = Stops {
            revoked: cancelled(),
            caller_gone: cancelled(),
        };
        let why = revoked.fired().expect("fired");
        assert!(matches!(why, Stopped::Revoked), "the revoke is named first");
        let (outcome, body, detail) = not_dispatched(why);
        assert_eq!(outcome, Outcome::Error, "definite: nothing was sent");
        assert_eq!(body.expect("body")["isError"], true);
        assert!(detail.expect("detail").starts_with("not dispatched"));

        let gone = Stops {
            revoked: None,
            caller_gone: cancelled(),
        };
        let (_, body, detail) = not_dispatched(gone.fired().expect("fired"));
        assert!(detail.expect("detail").contains("cancelled by the caller"));
        let text = body.expect("body").to_string();
        assert!(text.contains("nothing was sent"), "{text}");
    }
}
