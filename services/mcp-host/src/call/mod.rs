//! One connected call, in the order the README gives: replay check, name
//! resolution (and the tracker plan), schema validation, admission recheck
//! and the switch, the account/configuration fence, the durable receipt,
//! dispatch. [`McpHost::call_as`] reads as those steps, one call each; the
//! steps live in `plan.rs` (what the name reaches and how a tracker call
//! routes), `target.rs` (the fence and what the dispatch reaches) and
//! `dispatch.rs` (the receipt, the task that settles it, the answer) and
//! `cancel.rs` (a caller's cancel of a call that left).

mod cancel;
mod dispatch;
mod plan;
mod target;

pub(crate) use cancel::Cancels;
pub(crate) use plan::Plan;

use clankie_types::fleet::{ReceiptId, ReceiptKind};
use std::time::{Duration, Instant};

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use serde_json::Value;

use crate::receipts::Begin;
use crate::{McpHost, Requester, arguments_hash};

/// A call's arguments and receipt id, checked as the caller sent them.
pub(crate) struct Ask {
    pub args: Value,
    pub receipt_id: String,
    pub args_sha: String,
    /// A work-item write's journal key (empty for every other call).
    pub journal: String,
}

impl Ask {
    /// Arguments must be a JSON object (empty means `{}`); a receipt id the
    /// caller did not choose is made here, once.
    fn parse(req: &mcphost_pb::CallToolRequest) -> Result<Ask, ClankieError> {
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
        let given = Some(req.receipt_id.as_str()).filter(|id| !id.is_empty());
        let receipt_id = ReceiptId::given_or_mint(given, ReceiptKind::Call)?.into_string();
        let args_sha = arguments_hash(&args);
        Ok(Ask {
            args,
            receipt_id,
            args_sha,
            journal: String::new(),
        })
    }
}

/// The qualified name a call's receipt records: a grant names its tools by
/// their real names, on its one server.
fn qualified(who: &Requester, name: &str) -> String {
    match who {
        Requester::Grant(g) => format!("{}_{name}", g.grant.server),
        Requester::Fleet(_) | Requester::Owner => name.to_string(),
    }
}

impl McpHost {
    /// A grant call's argument pins and forbidden names.
    fn check_granted(&self, who: &Requester, name: &str, args: &Value) -> Result<(), ClankieError> {
        match who {
            Requester::Grant(g) => match g.grant.tool(name) {
                Some(tool) => tool.check(args),
                None => Err(ErrorCode::UnknownTool.err(format!(
                    "unknown tool {name}: the grant serves only the tools it lists"
                ))),
            },
            Requester::Fleet(_) | Requester::Owner => Ok(()),
        }
    }

    /// What stops a call at its dispatch boundary: its grant's revocation,
    /// and its caller going away.
    fn stops(
        &self,
        who: &Requester,
        caller_gone: Option<tokio_util::sync::CancellationToken>,
    ) -> dispatch::Stops {
        dispatch::Stops {
            revoked: match who {
                Requester::Grant(g) => Some(self.inner.grants.abort_token(&g.grant.grant_id)),
                Requester::Fleet(_) | Requester::Owner => None,
            },
            caller_gone,
        }
    }

    /// Dispatches one connected tool once, for a fleet request or the
    /// owner's route (tracker vocabulary only).
    pub async fn call_as(
        &self,
        who: &Requester,
        req: mcphost_pb::CallToolRequest,
        budget: Duration,
        caller_gone: Option<tokio_util::sync::CancellationToken>,
        listen: crate::relay::Listen,
    ) -> Result<mcphost_pb::CallResult, ClankieError> {
        self.call_journaled(who, req, String::new(), budget, caller_gone, listen)
            .await
    }

    /// [`Self::call_as`] with a work-item write's journal key recorded on
    /// its receipt (and required of any repeat).
    pub(crate) async fn call_journaled(
        &self,
        who: &Requester,
        req: mcphost_pb::CallToolRequest,
        journal: String,
        budget: Duration,
        caller_gone: Option<tokio_util::sync::CancellationToken>,
        listen: crate::relay::Listen,
    ) -> Result<mcphost_pb::CallResult, ClankieError> {
        let started = Instant::now();
        // What stops the call is taken before its first await, so a revoke
        // or a cancel at any point of the setup is seen at the boundary.
        let stops = self.stops(who, caller_gone);
        let mut ask = Ask::parse(&req)?;
        ask.journal = journal;
        // 1. A repeated receipt id reads its original and never dispatches.
        if let Some(existing) = self.inner.receipts.get(&ask.receipt_id) {
            let principal = self.principal(who, false).await?;
            return self.replay(existing, who, &principal, &qualified(who, &req.name), &ask);
        }
        self.inner.receipts.health()?;
        // 2. The name resolves to one entry; a tracker call gets its plan.
        let entry = self.resolve(who, &req.name)?;
        let plan = self.plan(who, &entry, &ask.args).await?;
        // 3. The arguments match the entry's schema, and a grant's pins.
        entry.validate(&ask.args)?;
        self.check_granted(who, &req.name, &ask.args)?;
        // 4, 5. The last awaits before effects: admission, then the switch.
        let principal = self.principal(who, true).await?;
        // 6. The account/configuration fence; no await from here until the
        // receipt is durable. The budget is the last check, so a call
        // refused earlier is not counted.
        let target = self.fence(&entry, plan.as_ref(), &ask.args)?;
        let counted = self.count(plan.as_ref(), &entry.tool, req.background)?;
        // 7. The durable receipt (or the original, when the id raced).
        let record = self.record(who, &principal, &entry, &ask, req.background);
        if let Begin::Existing(existing) = self.begin(&record, counted).await? {
            return self.replay(*existing, who, &principal, &qualified(who, &req.name), &ask);
        }
        // 8. Dispatch in a task of its own, and answer with its outcome, or
        // uncertain once the budget is spent.
        let attached = dispatch::Attached { stops, listen };
        let settled = self.dispatch(target, &entry, plan.as_ref(), &ask, &record, attached);
        let wait = budget.saturating_sub(started.elapsed());
        Ok(self.answer(settled, record, wait).await)
    }
}
