//! The mcp-host service.
//!
//! Owns: connected accounts (real upstream MCP servers), the catalog of
//! qualified names and its revision, the bridge's search/describe/call, the
//! durable connected-call receipts and the provider-call audit.
//!
//! Does not own: admission or the fleet switch. Before every dispatch it asks
//! the admission service to recheck the request's ticket (admission, then the
//! switch), then runs its own account/configuration fence, in that order,
//! after every other await. A call already past those checks may still reach
//! the provider after a change: the switch stops new calls (ADR 0217).

pub mod accounts;
pub mod audit;
pub mod catalog;
pub mod receipts;
pub mod tracker;

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clankie_proto::admission::v1 as apb;
use clankie_proto::common::v1::{FleetTools, Principal};
use clankie_proto::mailbox::v1 as mpb;
use clankie_proto::mcphost::v1 as pb;
use clankie_proto::tracker::v1 as tpb;
use clankie_runtime::grpc::{self, Client, Meta};
use clankie_runtime::owner::OwnerCheck;
use clankie_runtime::paths::StatePaths;
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{oneshot, watch};
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::accounts::{Registry, Transport};
use crate::catalog::Catalog;
use crate::receipts::{Begin, Outcome, ReceiptStore, Record};
use clankie_runtime::refuse::mcp_host as refuse;

/// The total budget of a request when the caller sets none.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(30);
/// How long a dispatched call may still settle its receipt after its caller
/// stopped waiting.
pub const COMPLETION_LIFETIME: Duration = Duration::from_secs(600);
/// Settled bodies kept before retention trims older ones.
pub const DEFAULT_RETAINED_BODIES: usize = 10_000;
/// Reply this long before the caller's deadline, so "uncertain" arrives.
const REPLY_MARGIN: Duration = Duration::from_millis(300);

/// Options for the mcp-host.
pub struct Options {
    pub paths: StatePaths,
    pub retained_bodies: usize,
}

impl Options {
    pub fn new(paths: StatePaths) -> Self {
        Options {
            paths,
            retained_bodies: DEFAULT_RETAINED_BODIES,
        }
    }

    /// Opens state and starts every account's supervisor.
    pub async fn build(self, shutdown: CancellationToken) -> anyhow::Result<McpHost> {
        let owner = OwnerCheck::load(&self.paths.owner_credential())?;
        let receipts = ReceiptStore::open(&self.paths.receipts_dir(), self.retained_bodies)?;
        if let Err(e) = receipts.health() {
            tracing::error!(reason = e.code.as_str(), problem = %e.message, "receipt store refused");
        }
        let accounts = Registry::open(self.paths.service_dir("mcp-host"), shutdown)?;
        let audit = audit::Audit::open(&self.paths.audit_dir())?;
        let admission = clankie_runtime::clients::admission(&self.paths, Meta::default());
        let owner_token = clankie_runtime::owner::read_owner_token(&self.paths.owner_credential())?;
        let mailbox = clankie_runtime::clients::mailbox(&self.paths, Meta::default());
        let tracker_client = clankie_runtime::clients::tracker(&self.paths, Meta::default());
        Ok(McpHost {
            inner: Arc::new(Inner {
                owner,
                catalog: accounts.catalog(),
                accounts,
                receipts,
                audit,
                admission,
                mailbox,
                tracker: tracker_client,
                owner_token,
                budgets: tracker::Budgets::default(),
            }),
        })
    }
}

struct Inner {
    owner: OwnerCheck,
    accounts: Registry,
    catalog: watch::Receiver<Arc<Catalog>>,
    receipts: ReceiptStore,
    audit: audit::Audit,
    admission: apb::admission_client::AdmissionClient<Client>,
    mailbox: mpb::mailbox_client::MailboxClient<Client>,
    tracker: tpb::tracker_client::TrackerClient<Client>,
    /// The owner credential, for the host's own calls to the tracker and the
    /// mailbox's owner route.
    owner_token: String,
    budgets: tracker::Budgets,
}

/// Who a call comes from: an admitted fleet request, or the owner's route.
#[derive(Debug, Clone)]
pub enum Who {
    Fleet(String),
    Owner,
}

/// What a dispatch reaches.
enum Target {
    Upstream(rmcp::Peer<rmcp::RoleClient>, accounts::InflightGuard),
    Store(tpb::InvokeRequest),
}

/// A tracker vocabulary call's resolved caller and backend.
struct Plan {
    caller: tracker::TrackerCaller,
    backend: tracker::Backend,
    write: bool,
    /// The team a limited caller's writes stay in, when its route is a
    /// built-in project (empty: unscoped).
    scope_team: String,
}

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

/// The mcp-host service; cheap to clone.
#[derive(Clone)]
pub struct McpHost {
    inner: Arc<Inner>,
}

/// The audit principal: `fleet:ID:pane:PANE`, `pane:unverified` for bearers.
pub fn audit_principal(p: &Principal) -> String {
    let pane = if p.pane_id.is_empty() {
        "unverified"
    } else {
        p.pane_id.as_str()
    };
    format!("fleet:{}:pane:{}", p.fleet_id, pane)
}

/// Whose a call is: the owner route, or the principal admission proved.
fn owner_of(who: &Who, principal: &Principal) -> String {
    match who {
        Who::Owner => "owner".into(),
        Who::Fleet(_) => clankie_runtime::principal::owner_key(principal),
    }
}

/// The audit principal text a record of this caller carries.
fn audit_text(who: &Who, principal: &Principal) -> String {
    match who {
        Who::Owner => "owner".into(),
        Who::Fleet(_) => audit_principal(principal),
    }
}

fn arguments_hash(args: &Value) -> String {
    hex::encode(Sha256::digest(serde_json::to_vec(args).unwrap_or_default()))
}

fn result_pb(r: &Record, from_receipt: bool) -> pb::CallResult {
    pb::CallResult {
        receipt_id: r.receipt_id.clone(),
        outcome: r.visible_outcome().as_str().into(),
        result_json: r.result.as_ref().map(|v| v.to_string()).unwrap_or_default(),
        name: r.name.clone(),
        dispatched_at_ms: r.dispatched_at_ms,
        settled_at_ms: r.settled_at_ms.unwrap_or(0),
        from_receipt,
        trimmed: r.trimmed,
        detail: r.detail.clone().unwrap_or_default(),
    }
}

impl McpHost {
    /// Ready while the receipt store is sound, the accounts file readable,
    /// and every account has had its first verdict since start.
    pub fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        let inner = self.inner.clone();
        clankie_runtime::readiness::Readiness::check(move || {
            if let Err(e) = inner.receipts.health() {
                return Some(format!("receipt store: {}", e.code));
            }
            if inner.accounts.unreadable() {
                return Some("accounts file unreadable".into());
            }
            inner
                .accounts
                .loading()
                .then(|| "the tool catalog is loading".into())
        })
    }

    /// The tonic routes for this service.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(
            pb::mcp_host_server::McpHostServer::new(self.clone())
                .max_decoding_message_size(8 << 20)
                .max_encoding_message_size(16 << 20),
        )
    }

    /// Closes every account connection (after in-flight calls settle).
    pub async fn close(&self) {
        self.inner.accounts.close().await;
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.inner.catalog.borrow().clone()
    }

    /// Admission, then the switch, for the ticket a request carries.
    async fn recheck(&self, ticket: &str, need_tools: bool) -> Result<Principal, ClankieError> {
        let mut req = Request::new(apb::RecheckRequest {
            ticket: ticket.to_string(),
        });
        req.set_timeout(Duration::from_secs(5));
        let resp = self
            .inner
            .admission
            .clone()
            .recheck(req)
            .await
            .map_err(|s| ClankieError::from_status(&s))?
            .into_inner();
        let principal = resp
            .principal
            .ok_or_else(|| ErrorCode::Internal.err("admission answered without a principal"))?;
        let settings = resp.settings.unwrap_or_default();
        if need_tools && settings.unreadable {
            return Err(ErrorCode::SettingsUnreadable.err(
                "the fleet settings cannot be read, so fleet tools read as off until the owner repairs them",
            ));
        }
        if need_tools && settings.tools != FleetTools::Connected as i32 {
            return Err(ErrorCode::FleetToolsOff.err("the owner turned fleet tools off"));
        }
        Ok(principal)
    }

    /// The principal of a call: the ticket's, rechecked, or the owner's.
    async fn principal(&self, who: &Who, need_tools: bool) -> Result<Principal, ClankieError> {
        match who {
            Who::Fleet(ticket) => self.recheck(ticket, need_tools).await,
            Who::Owner => Ok(Principal {
                fleet_id: "owner".into(),
                ..Default::default()
            }),
        }
    }

    fn ticket<T>(req: &Request<T>) -> Result<String, ClankieError> {
        grpc::ticket(req.metadata())
            .map(str::to_string)
            .ok_or_else(|| {
                ErrorCode::FleetCredentialRequired.err("the request carries no admission ticket")
            })
    }

    /// Dispatches one connected tool once. See the crate docs for the order
    /// of checks.
    pub async fn call(
        &self,
        ticket: &str,
        req: pb::CallToolRequest,
        budget: Duration,
    ) -> Result<pb::CallResult, ClankieError> {
        self.call_as(&Who::Fleet(ticket.to_string()), req, budget)
            .await
    }

    fn owner_request<T>(&self, msg: T, timeout: Duration) -> Request<T> {
        let mut req = Request::new(msg);
        req.set_timeout(timeout);
        if let Ok(v) = format!("Bearer {}", self.inner.owner_token).parse() {
            req.metadata_mut()
                .insert(clankie_runtime::owner::AUTHORIZATION, v);
        }
        req
    }

    /// The caller's tracker role and route, from the hire ledger.
    async fn tracker_caller(
        &self,
        who: &Who,
        repo: &str,
    ) -> Result<tracker::TrackerCaller, ClankieError> {
        let msg = mpb::ResolveCallerRequest {
            repo: repo.to_string(),
        };
        let req = match who {
            Who::Owner => self.owner_request(msg, Duration::from_secs(5)),
            Who::Fleet(ticket) => {
                let mut req = Request::new(msg);
                req.set_timeout(Duration::from_secs(5));
                grpc::set_ticket(&mut req, ticket);
                req
            }
        };
        let info = self
            .inner
            .mailbox
            .clone()
            .resolve_caller(req)
            .await
            .map_err(|s| ClankieError::from_status(&s))?
            .into_inner();
        Ok(tracker::TrackerCaller {
            role: tracker::role_of(&info.role),
            actor: info.actor,
            route: info.route,
            route_team: info.route_team,
            route_problem: info.route_problem,
            route_project: info.route_project,
        })
    }

    /// Which of `refs` the built-in store owns.
    async fn owned(&self, refs: Vec<String>) -> Result<Vec<String>, ClankieError> {
        if refs.is_empty() {
            return Ok(Vec::new());
        }
        let req = self.owner_request(
            tpb::OwnsItemRequest { references: refs },
            Duration::from_secs(5),
        );
        Ok(self
            .inner
            .tracker
            .clone()
            .owns_item(req)
            .await
            .map_err(|s| {
                let e = ClankieError::from_status(&s);
                ErrorCode::TrackerRouteUnavailable.err(format!(
                    "the built-in tracker cannot be read here: {}",
                    e.message
                ))
            })?
            .into_inner()
            .owned)
    }

    fn policy_refused(
        &self,
        e: ClankieError,
        caller: &tracker::TrackerCaller,
        tool: &str,
    ) -> ClankieError {
        tracing::info!(
            reason = e.code.as_str(),
            role = caller.role.as_str(),
            tool,
            principal = %caller.actor,
            "tracker.policy.refused"
        );
        e
    }

    /// Resolves role, profile and route of a tracker vocabulary call.
    async fn tracker_plan(
        &self,
        who: &Who,
        entry: &catalog::Entry,
        args: &Value,
    ) -> Result<Plan, ClankieError> {
        let def = clankie_tracker::vocabulary::find(&entry.tool).ok_or_else(|| {
            ErrorCode::UnknownTool.err(format!("{} is not a tracker tool", entry.qualified))
        })?;
        let repo = args.get("repo").and_then(Value::as_str).unwrap_or("");
        let caller = self.tracker_caller(who, repo).await?;
        if let Err(e) = tracker::check_profile(&entry.tool, caller.role, args) {
            self.inner
                .budgets
                .note_refusal(&caller.actor, caller.role, now_ms());
            return Err(self.policy_refused(e, &caller, &entry.tool));
        }
        let owned = if repo.is_empty() {
            self.owned(tracker::references(args, true)).await?
        } else {
            Vec::new()
        };
        let history = args.get("linearHistory").and_then(Value::as_bool) == Some(true);
        let linear = self
            .inner
            .accounts
            .verified_generation(tracker::ACCOUNT)
            .is_some();
        let backend = tracker::route(
            &caller,
            !repo.is_empty(),
            &owned,
            history,
            def.write,
            linear,
        )
        .map_err(|e| self.policy_refused(e, &caller, &entry.tool))?;
        // A limited caller routed to a built-in project by its hire (or an
        // explicit repo) writes only inside that project's team; a call
        // that reached the store because it names a cut-over item is not
        // scoped.
        let scope_team = if backend == tracker::Backend::Store
            && caller.role.limited()
            && owned.is_empty()
            && caller.route == "builtin"
        {
            caller.route_team.clone()
        } else {
            String::new()
        };
        Ok(Plan {
            caller,
            backend,
            write: def.write,
            scope_team,
        })
    }

    /// Dispatches one connected tool once, for a fleet request or the
    /// owner's route (tracker vocabulary only).
    pub async fn call_as(
        &self,
        who: &Who,
        req: pb::CallToolRequest,
        budget: Duration,
    ) -> Result<pb::CallResult, ClankieError> {
        let started = Instant::now();
        let args: Value = if req.arguments_json.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(&req.arguments_json).map_err(|e| {
                ErrorCode::InvalidArgument.err(format!("arguments are not valid JSON: {e}"))
            })?
        };
        if !args.is_object() {
            return Err(ErrorCode::InvalidArgument.err("arguments must be a JSON object"));
        }
        let receipt_id = if req.receipt_id.is_empty() {
            format!("rcpt_{}", uuid::Uuid::new_v4().simple())
        } else if clankie_runtime::limits::receipt_id_ok(&req.receipt_id) {
            req.receipt_id.clone()
        } else {
            return Err(ErrorCode::InvalidArgument.err(clankie_runtime::limits::RECEIPT_ID_RULE));
        };
        let args_sha = arguments_hash(&args);
        if let Some(existing) = self.inner.receipts.get(&receipt_id) {
            // A repeated id reads its original and never dispatches.
            let principal = self.principal(who, false).await?;
            return self.replay(existing, who, &principal, &req.name, &args_sha);
        }
        self.inner.receipts.health()?;
        let catalog = self.catalog();
        let entry = catalog.resolve(&req.name).map_err(|e| {
            // Right after a start, a name may belong to an account that has
            // not answered yet: that is not an unknown tool.
            if e.code == ErrorCode::UnknownTool && self.inner.accounts.loading() {
                ErrorCode::ServiceUnavailable
                    .err("the tool catalog is still loading after a restart; nothing was dispatched, retry shortly")
            } else {
                e
            }
        })?;
        if matches!(who, Who::Owner) && !entry.builtin {
            return Err(ErrorCode::FleetCredentialRequired
                .err("the owner's route reaches the tracker vocabulary only"));
        }
        let plan = if entry.builtin {
            Some(self.tracker_plan(who, &entry, &args).await?)
        } else {
            None
        };
        if !entry.builtin && entry.account == tracker::ACCOUNT {
            // Linear's own tools do not reach a project whose issues live
            // in the built-in store, nor an item that moved there.
            let repo = args.get("repo").and_then(Value::as_str).unwrap_or("");
            let caller = self.tracker_caller(who, repo).await?;
            if caller.route == "builtin" {
                return Err(self.policy_refused(
                    ErrorCode::TrackerCutOver.err(format!(
                        "project {} keeps its issues in the built-in tracker; {} cannot reach it. Use the linear_* tracker tools (linear_save_issue, linear_save_comment, linear_list_issues)",
                        caller.route_project, entry.qualified
                    )),
                    &caller,
                    &entry.tool,
                ));
            }
            let owned = self.owned(tracker::references(&args, false)).await?;
            if let Some(item) = owned.first() {
                return Err(ErrorCode::TrackerCutOver.err(format!(
                    "{item} lives in the built-in tracker now; {} cannot reach it there. Use the linear_* tracker tools (linear_get_issue, linear_save_issue, linear_save_comment), or pass linearHistory: true on a read for the frozen Linear copy",
                    entry.qualified
                )));
            }
        }
        entry.validate(&args)?;
        // The last awaits before effects: admission, then the switch ...
        let principal = self.principal(who, true).await?;
        // ... then the account/configuration fence, with no await after it
        // until the durable receipt.
        if self
            .catalog()
            .get(&entry.qualified)
            .map(|e| &e.definition_sha256)
            != Some(&entry.definition_sha256)
        {
            return Err(ErrorCode::AccountChanged.err(format!(
                "{} changed while the call was being checked; describe it again",
                entry.qualified
            )));
        }
        let target = match &plan {
            None => {
                let (peer, guard) = self
                    .inner
                    .accounts
                    .dispatch_handle(&entry.account, entry.generation)?;
                Target::Upstream(peer, guard)
            }
            Some(Plan {
                backend: tracker::Backend::Linear { .. },
                ..
            }) => {
                let generation = self
                    .inner
                    .accounts
                    .verified_generation(tracker::ACCOUNT)
                    .ok_or_else(|| {
                        ErrorCode::AccountUnavailable.err(
                            "this call's tracker is Linear, and no verified Linear account is connected",
                        )
                    })?;
                let (peer, guard) = self
                    .inner
                    .accounts
                    .dispatch_handle(tracker::ACCOUNT, generation)?;
                Target::Upstream(peer, guard)
            }
            Some(p) => Target::Store(tpb::InvokeRequest {
                tool: entry.tool.clone(),
                arguments_json: args.to_string(),
                actor: p.caller.actor.clone(),
                role: p.caller.role.as_str().into(),
                scope_team: p.scope_team.clone(),
            }),
        };
        // The budget is the last check: a call refused earlier is not counted.
        let class = if req.background {
            tracker::Class::Background
        } else {
            tracker::Class::Interactive
        };
        let counted = match &plan {
            Some(p) => self
                .inner
                .budgets
                .admit(&p.caller.actor, p.caller.role, class, p.write, now_ms())
                .map_err(|e| self.policy_refused(e, &p.caller, &entry.tool))?,
            None => None,
        };
        let principal_text = audit_text(who, &principal);
        let record = Record {
            receipt_id: receipt_id.clone(),
            seq: 0,
            fleet: principal.fleet_id.clone(),
            principal: principal_text.clone(),
            owner: owner_of(who, &principal),
            name: entry.qualified.clone(),
            account: entry.account.clone(),
            account_generation: entry.generation,
            arguments_sha256: args_sha.clone(),
            background: req.background,
            status: receipts::Status::Dispatched,
            outcome: None,
            result: None,
            detail: None,
            dispatched_at_ms: now_ms(),
            settled_at_ms: None,
            trimmed: false,
        };
        let begun = self.inner.receipts.begin(record.clone()).await;
        if !matches!(begun, Ok(Begin::Durable))
            && let Some(c) = counted
        {
            // Nothing was dispatched: the call does not count.
            self.inner.budgets.refund(c);
        }
        match begun? {
            Begin::Existing(existing) => {
                return self.replay(*existing, who, &principal, &req.name, &args_sha);
            }
            Begin::Durable => {}
        }
        self.inner.audit.record(&audit::Event {
            event: "dispatch",
            principal: &principal_text,
            account: &entry.account,
            tool: &entry.tool,
            receipt_id: &receipt_id,
            outcome: None,
            trace_id: clankie_runtime::telemetry::current_trace_id(),
        });
        let (tx, rx) = oneshot::channel();
        let store = self.inner.receipts.clone();
        let audit = self.inner.audit.clone();
        let tool = entry.tool.clone();
        let account = entry.account.clone();
        let rid = receipt_id.clone();
        let history = matches!(
            plan,
            Some(Plan {
                backend: tracker::Backend::Linear { history: true },
                ..
            })
        );
        let params = {
            let mut p = rmcp::model::CallToolRequestParams::new(tool.clone());
            let mut a = args.as_object().cloned();
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
        let tracker_client = self.inner.tracker.clone();
        let invoke_auth = format!("Bearer {}", self.inner.owner_token);
        // The call runs in its own task so it keeps its completion lifetime
        // and settles the receipt even when the caller stops waiting.
        tokio::spawn(async move {
            let (peer, _guard, invoke) = match target {
                Target::Upstream(peer, guard) => (Some(peer), Some(guard), None),
                Target::Store(invoke) => (None, None, Some(invoke)),
            };
            let (outcome, body, detail) = if let Some(invoke) = invoke {
                let mut r = Request::new(invoke);
                r.set_timeout(COMPLETION_LIFETIME);
                if let Ok(v) = invoke_auth.parse() {
                    r.metadata_mut()
                        .insert(clankie_runtime::owner::AUTHORIZATION, v);
                }
                let mut client = tracker_client;
                match client.invoke(r).await {
                    Ok(resp) => {
                        let structured: Value =
                            serde_json::from_str(&resp.into_inner().result_json)
                                .unwrap_or(Value::Null);
                        (Outcome::Ok, Some(tool_result(structured, false)), None)
                    }
                    Err(s) if s.metadata().contains_key(clankie_runtime::code::REASON_KEY) => {
                        // The tracker answered: nothing was written.
                        let e = ClankieError::from_status(&s);
                        (
                            Outcome::Error,
                            Some(tool_result(serde_json::json!({ "error": e.body() }), true)),
                            None,
                        )
                    }
                    Err(s) => (
                        Outcome::Uncertain,
                        None,
                        Some(format!(
                            "the tracker connection failed after dispatch ({}); the call may have applied",
                            s.message()
                        )),
                    ),
                }
            } else if let Some(peer) = peer {
                let answer =
                    tokio::time::timeout(COMPLETION_LIFETIME, peer.call_tool(params)).await;
                match answer {
                    Ok(Ok(result)) => {
                        let outcome = if result.is_error == Some(true) {
                            Outcome::Error
                        } else {
                            Outcome::Ok
                        };
                        (outcome, serde_json::to_value(&result).ok(), None)
                    }
                    Ok(Err(rmcp::ServiceError::McpError(e))) => (
                        Outcome::Error,
                        Some(
                            serde_json::json!({ "error": { "code": e.code.0, "message": e.message } }),
                        ),
                        Some("the upstream answered with a protocol error".to_string()),
                    ),
                    Ok(Err(e)) => (
                        Outcome::Uncertain,
                        None,
                        Some(format!(
                            "the connection failed after dispatch ({e}); the call may have applied"
                        )),
                    ),
                    Err(_) => (
                        Outcome::Uncertain,
                        None,
                        Some(
                            "no answer within the completion lifetime; the call may have applied"
                                .into(),
                        ),
                    ),
                }
            } else {
                (Outcome::Uncertain, None, Some("no dispatch target".into()))
            };
            let body = if history {
                body.map(mark_history)
            } else {
                body
            };
            let settled = store.settle(&rid, outcome, body, detail).await;
            audit.record(&audit::Event {
                event: "settle",
                principal: &principal_text,
                account: &account,
                tool: &tool,
                receipt_id: &rid,
                outcome: Some(outcome.as_str()),
                trace_id: None,
            });
            let _ = tx.send(settled);
        });
        let wait = budget
            .saturating_sub(started.elapsed())
            .saturating_sub(REPLY_MARGIN);
        // Past this point the call was dispatched: every answer carries its
        // receipt, and none is a refusal.
        let detail = match tokio::time::timeout(wait, rx).await {
            Ok(Ok(Ok(settled))) => return Ok(result_pb(&settled, false)),
            // The outcome is known but not durable: a crash now would leave
            // the receipt reading "dispatched", so the honest answer is
            // uncertain until the store takes the write.
            Ok(Ok(Err(e))) => format!(
                "the call ran, but its outcome could not be recorded ({}); reconcile with clankie_call({{receiptId}})",
                e.code.as_str()
            ),
            Ok(Err(_)) | Err(_) => {
                "the deadline passed after dispatch: the call may have applied; reconcile with clankie_call({receiptId})"
                    .into()
            }
        };
        let mut r = self.inner.receipts.get(&receipt_id).unwrap_or(record);
        r.detail = Some(detail);
        r.result = None;
        let mut out = result_pb(&r, false);
        out.outcome = Outcome::Uncertain.as_str().into();
        Ok(out)
    }

    fn replay(
        &self,
        existing: Record,
        who: &Who,
        principal: &Principal,
        name: &str,
        args_sha: &str,
    ) -> Result<pb::CallResult, ClankieError> {
        // Another caller's id is taken, and that is all it learns.
        if existing.fleet != principal.fleet_id
            || !existing.belongs_to(&owner_of(who, principal), &audit_text(who, principal))
        {
            return Err(ErrorCode::ReceiptConflict.err("this receipt id is taken; choose a new id"));
        }
        if existing.name != name || existing.arguments_sha256 != args_sha {
            return Err(ErrorCode::ReceiptConflict.err(
                "this receipt id belongs to a different call; reconcile it with clankie_call({receiptId}) or choose a new id",
            ));
        }
        Ok(result_pb(&existing, true))
    }

    /// Reads a receipt for the principal that made the call; never
    /// dispatches. Anyone else hears `receipt_not_found`, exactly as for an
    /// id that was never used.
    pub async fn receipt(
        &self,
        ticket: &str,
        receipt_id: &str,
    ) -> Result<pb::CallResult, ClankieError> {
        let principal = self.recheck(ticket, false).await?;
        let who = Who::Fleet(ticket.to_string());
        match self.inner.receipts.get(receipt_id) {
            Some(r)
                if r.fleet == principal.fleet_id
                    && r.belongs_to(&owner_of(&who, &principal), &audit_text(&who, &principal)) =>
            {
                Ok(result_pb(&r, true))
            }
            _ => {
                // A damaged store cannot say a receipt does not exist.
                self.inner.receipts.health()?;
                Err(ErrorCode::ReceiptNotFound.err("no receipt with this id for this caller"))
            }
        }
    }

    fn catalog_info(c: &Catalog) -> pb::CatalogInfo {
        pb::CatalogInfo {
            revision: c.revision,
            connected: c.connected.clone(),
            tool_count: c.len() as u32,
        }
    }

    /// The catalog a fleet request may see (refused while tools are off),
    /// and the tracker role it sees the vocabulary as.
    async fn fleet_catalog<T>(
        &self,
        req: &Request<T>,
    ) -> Result<(Arc<Catalog>, clankie_tracker::vocabulary::Role), ClankieError> {
        let ticket = Self::ticket(req)?;
        self.recheck(&ticket, true).await?;
        let role = self.tracker_caller(&Who::Fleet(ticket), "").await?.role;
        Ok((self.catalog(), role))
    }
}

type CatalogStream = Pin<Box<dyn Stream<Item = Result<pb::CatalogInfo, Status>> + Send>>;

#[tonic::async_trait]
impl pb::mcp_host_server::McpHost for McpHost {
    async fn connect_account(
        &self,
        request: Request<pb::ConnectRequest>,
    ) -> Result<Response<pb::ConnectResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        let req = request.into_inner();
        let transport = Transport::from_pb(req.transport).map_err(refuse)?;
        let wait = Duration::from_millis(u64::from(req.wait_verified_ms.min(60_000)));
        let account = self
            .inner
            .accounts
            .connect(&req.name, transport, wait)
            .await
            .map_err(refuse)?;
        Ok(Response::new(pb::ConnectResponse {
            account: Some(account),
        }))
    }

    async fn disconnect_account(
        &self,
        request: Request<pb::DisconnectRequest>,
    ) -> Result<Response<pb::DisconnectResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        let removed = self
            .inner
            .accounts
            .disconnect(&request.into_inner().name)
            .map_err(refuse)?;
        Ok(Response::new(pb::DisconnectResponse { removed }))
    }

    async fn list_accounts(
        &self,
        request: Request<pb::ListAccountsRequest>,
    ) -> Result<Response<pb::ListAccountsResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        Ok(Response::new(pb::ListAccountsResponse {
            accounts: self.inner.accounts.list(),
            revision: self.catalog().revision,
        }))
    }

    async fn receipt_stats(
        &self,
        request: Request<pb::ReceiptStatsRequest>,
    ) -> Result<Response<pb::ReceiptStatsResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        let s = self.inner.receipts.stats();
        Ok(Response::new(pb::ReceiptStatsResponse {
            healthy: s.problem.is_none(),
            problem: s.problem.unwrap_or_default(),
            records: s.records,
            uncertain: s.uncertain,
            pending: s.pending,
            trimmed: s.trimmed,
            buckets: s.buckets,
            commits: s.commits,
            synced_writes: s.synced_writes,
        }))
    }

    async fn catalog(
        &self,
        request: Request<pb::CatalogRequest>,
    ) -> Result<Response<pb::CatalogInfo>, Status> {
        let ticket = Self::ticket(&request).map_err(refuse)?;
        self.recheck(&ticket, false).await.map_err(refuse)?;
        Ok(Response::new(Self::catalog_info(&self.catalog())))
    }

    type WatchCatalogStream = CatalogStream;

    async fn watch_catalog(
        &self,
        _request: Request<pb::CatalogRequest>,
    ) -> Result<Response<Self::WatchCatalogStream>, Status> {
        use tokio_stream::StreamExt as _;
        let rx = self.inner.catalog.clone();
        let stream =
            tokio_stream::wrappers::WatchStream::new(rx).map(|c| Ok(Self::catalog_info(&c)));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn search_tools(
        &self,
        request: Request<pb::SearchToolsRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
        let (catalog, role) = self.fleet_catalog(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        if req.query.len() > 1024 {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("query is longer than 1024 bytes"),
            ));
        }
        let limit = if req.limit == 0 {
            catalog::MAX_SEARCH
        } else {
            req.limit as usize
        };
        let (hits, total) = catalog.search_visible(&req.query, limit, |e| {
            !e.builtin || tracker::visible_schema(&e.tool, role).is_some()
        });
        Ok(Response::new(pb::SearchToolsResponse {
            tools: hits
                .iter()
                .map(|e| pb::ToolSummary {
                    name: e.qualified.clone(),
                    description: e.one_line(),
                })
                .collect(),
            revision: catalog.revision,
            total_matches: total as u32,
        }))
    }

    async fn describe_tools(
        &self,
        request: Request<pb::DescribeToolsRequest>,
    ) -> Result<Response<pb::DescribeToolsResponse>, Status> {
        let (catalog, role) = self.fleet_catalog(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        Ok(Response::new(pb::DescribeToolsResponse {
            tools: catalog
                .describe_visible(&req.names, |e| {
                    !e.builtin || tracker::visible_schema(&e.tool, role).is_some()
                })
                .iter()
                .map(|e| pb::ToolDescription {
                    name: e.qualified.clone(),
                    description: e.description.clone(),
                    input_schema_json: if e.builtin {
                        tracker::visible_schema(&e.tool, role).unwrap_or(Value::Null)
                    } else {
                        Value::Object((*e.schema).clone())
                    }
                    .to_string(),
                })
                .collect(),
            revision: catalog.revision,
        }))
    }

    async fn call_tool(
        &self,
        request: Request<pb::CallToolRequest>,
    ) -> Result<Response<pb::CallResult>, Status> {
        let who = match grpc::ticket(request.metadata()) {
            Some(t) => Who::Fleet(t.to_string()),
            None if clankie_runtime::owner::bearer(request.metadata()).is_some() => {
                self.inner
                    .owner
                    .verify(request.metadata())
                    .map_err(refuse)?;
                Who::Owner
            }
            None => {
                return Err(refuse(
                    ErrorCode::FleetCredentialRequired
                        .err("the request carries no admission ticket"),
                ));
            }
        };
        let budget = grpc::deadline(request.metadata())
            .unwrap_or(DEFAULT_BUDGET)
            .min(DEFAULT_BUDGET);
        let result = self
            .call_as(&who, request.into_inner(), budget)
            .await
            .map_err(refuse)?;
        Ok(Response::new(result))
    }

    async fn tracker_budgets(
        &self,
        request: Request<pb::TrackerBudgetsRequest>,
    ) -> Result<Response<pb::TrackerBudgetsResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        Ok(Response::new(pb::TrackerBudgetsResponse {
            requests_per_hour: tracker::REQUESTS_PER_HOUR,
            writes_per_minute: tracker::WRITES_PER_MINUTE,
            actors: self.inner.budgets.snapshot(now_ms()),
        }))
    }

    async fn tracker_profiles(
        &self,
        request: Request<pb::TrackerProfilesRequest>,
    ) -> Result<Response<pb::TrackerProfilesResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        Ok(Response::new(pb::TrackerProfilesResponse {
            roles: tracker::profiles(),
        }))
    }

    async fn get_receipt(
        &self,
        request: Request<pb::GetReceiptRequest>,
    ) -> Result<Response<pb::CallResult>, Status> {
        let ticket = Self::ticket(&request).map_err(refuse)?;
        let id = request.into_inner().receipt_id;
        let result = self.receipt(&ticket, &id).await.map_err(refuse)?;
        Ok(Response::new(result))
    }
}

impl clankie_runtime::main_kit::Served for McpHost {
    fn routes(&self) -> tonic::service::Routes {
        McpHost::routes(self)
    }

    fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        McpHost::readiness(self)
    }

    async fn close(self) {
        McpHost::close(&self).await;
    }
}
