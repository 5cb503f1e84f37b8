//! What a call's name reaches: the catalog entry, the tracker plan of a
//! vocabulary call (role, profile, route, scope), and the cut-over rule
//! that keeps Linear's own tools away from items in the built-in store.

use std::sync::Arc;
use std::time::Duration;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::clients::{Answer, Call};
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use clankie_types::TrackerRoute;
use serde_json::Value;

use crate::{McpHost, Requester, catalog, tracker};

/// A tracker vocabulary call's resolved caller and backend.
pub(crate) struct Plan {
    pub caller: tracker::TrackerCaller,
    pub backend: tracker::Backend,
    pub write: bool,
    /// The team a limited caller's writes stay in, when its route is a
    /// built-in project (empty: unscoped).
    pub scope_team: String,
    /// A saved Linear route's lease, which the store holds for it: the
    /// connected resource now verified and the route's project.
    pub linear_route: Option<tracker_pb::LinearRoute>,
}

impl McpHost {
    /// The catalog entry a name resolves to. The owner's route reaches the
    /// tracker vocabulary only.
    pub(crate) fn resolve(
        &self,
        who: &Requester,
        name: &str,
    ) -> Result<Arc<catalog::Entry>, ClankieError> {
        if let Requester::Grant(g) = who {
            return self.resolve_granted(g, name).map(|(entry, _)| entry);
        }
        let entry = self.catalog().resolve(name).map_err(|e| {
            // Right after a start, a name may belong to an account that has
            // not answered yet, and an account waiting out its restart
            // backoff has no tools listed: neither is an unknown tool.
            if e.code != ErrorCode::UnknownTool {
                e
            } else if self.inner.accounts.loading() {
                ErrorCode::ServiceUnavailable
                    .err("the tool catalog is still loading after a restart; nothing was dispatched, retry shortly")
            } else if let Some(account) = self.inner.accounts.not_verified_owner_of(name) {
                ErrorCode::AccountUnavailable.err(format!(
                    "account {account} is not verified now (its server is restarting or cannot start); nothing was dispatched, retry shortly"
                ))
            } else {
                e
            }
        })?;
        if matches!(who, Requester::Owner) && !entry.builtin {
            return Err(ErrorCode::FleetCredentialRequired
                .err("the owner's route reaches the tracker vocabulary only"));
        }
        Ok(entry)
    }

    /// The tracker plan of a vocabulary call; for Linear's own tools, the
    /// cut-over check; nothing for any other account.
    pub(crate) async fn plan(
        &self,
        who: &Requester,
        entry: &catalog::Entry,
        args: &Value,
    ) -> Result<Option<Plan>, ClankieError> {
        if entry.builtin {
            return Ok(Some(self.tracker_plan(who, entry, args).await?));
        }
        if entry.account == tracker::ACCOUNT {
            self.refuse_cut_over(who, entry, args).await?;
        }
        Ok(None)
    }

    /// Linear's own tools do not reach a project whose issues live in the
    /// built-in store, nor an item that moved there.
    async fn refuse_cut_over(
        &self,
        who: &Requester,
        entry: &catalog::Entry,
        args: &Value,
    ) -> Result<(), ClankieError> {
        let repo = args.get("repo").and_then(Value::as_str).unwrap_or("");
        let caller = self.tracker_caller(who, repo).await?;
        if caller.route == Some(TrackerRoute::Builtin) {
            return Err(self.policy_refused(
                ErrorCode::TrackerCutOver.err(format!(
                    "project {} keeps its issues in the built-in tracker; {} cannot reach it. Use the linear_* tracker tools (linear_save_issue, linear_save_comment, linear_list_issues)",
                    caller.route_project, entry.qualified
                )),
                &caller,
                &entry.tool,
            ));
        }
        let owned = self.owned(tracker::references(args, false)).await?;
        if let Some(item) = owned.first() {
            return Err(ErrorCode::TrackerCutOver.err(format!(
                "{item} lives in the built-in tracker now; {} cannot reach it there. Use the linear_* tracker tools (linear_get_issue, linear_save_issue, linear_save_comment), or pass linearHistory: true on a read for the frozen Linear copy",
                entry.qualified
            )));
        }
        Ok(())
    }

    /// Resolves role, profile and route of a tracker vocabulary call.
    async fn tracker_plan(
        &self,
        who: &Requester,
        entry: &catalog::Entry,
        args: &Value,
    ) -> Result<Plan, ClankieError> {
        let def = clankie_types::vocabulary::find(&entry.tool).ok_or_else(|| {
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
        let mut backend = tracker::route(
            &caller,
            !repo.is_empty(),
            &owned,
            history,
            def.write,
            linear,
        )
        .map_err(|e| self.policy_refused(e, &caller, &entry.tool))?;
        let linear_route = if tracker::holds_for_route(&caller, &backend, &entry.tool) {
            backend = tracker::Backend::Store;
            Some(self.linear_route(&caller.route_project)?)
        } else {
            None
        };
        // A limited caller routed to a built-in project by its hire (or an
        // explicit repo) writes only inside that project's team; a call
        // that reached the store because it names a cut-over item is not
        // scoped.
        let scope_team = if backend == tracker::Backend::Store
            && caller.role.limited()
            && owned.is_empty()
            && caller.route == Some(TrackerRoute::Builtin)
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
            linear_route,
        })
    }

    /// A saved Linear route as the store keys it: the verified Linear
    /// identity connected now, and the route's project. With Linear
    /// disconnected the call is refused: it never falls to the store alone.
    pub(crate) fn linear_route(
        &self,
        project: &str,
    ) -> Result<tracker_pb::LinearRoute, ClankieError> {
        let resource = self
            .inner
            .accounts
            .verified_generation(tracker::ACCOUNT)
            .and_then(|_| self.inner.identities.get(tracker::ACCOUNT))
            .map(|i| i.stable())
            .ok_or_else(|| {
                ErrorCode::AccountUnavailable.err(
                    "this call's tracker is Linear, and no verified Linear account is connected; its lease is not taken anywhere else",
                )
            })?;
        Ok(tracker_pb::LinearRoute {
            resource,
            project: project.to_string(),
        })
    }

    /// The caller's tracker role and route, from the hire ledger.
    pub(crate) async fn tracker_caller(
        &self,
        who: &Requester,
        repo: &str,
    ) -> Result<tracker::TrackerCaller, ClankieError> {
        let msg = mailbox_pb::ResolveCallerRequest {
            repo: repo.to_string(),
        };
        let req = match who {
            // A grant is not a hire: a worker with no project route.
            Requester::Grant(g) => {
                return Ok(tracker::TrackerCaller {
                    role: clankie_types::vocabulary::Role::Worker,
                    actor: g.grant.audit_principal(),
                    route: None,
                    route_team: String::new(),
                    route_problem: String::new(),
                    route_project: String::new(),
                });
            }
            Requester::Owner => self.owner_request(msg, Duration::from_secs(5)),
            Requester::Fleet(ticket) => Call::new(msg)
                .timeout(Duration::from_secs(5))
                .ticket(ticket)
                .request(),
        };
        let info = self
            .inner
            .mailbox
            .clone()
            .resolve_caller(req)
            .await
            .answer()?;
        Ok(tracker::TrackerCaller {
            role: tracker::role_of(info.role),
            actor: info.actor,
            route: TrackerRoute::from_wire(info.route),
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
            tracker_pb::OwnsItemRequest { references: refs },
            Duration::from_secs(5),
        );
        let answer = self.inner.tracker.clone().owns_item(req).await.answer();
        Ok(answer
            .map_err(|e| {
                ErrorCode::TrackerRouteUnavailable.err(format!(
                    "the built-in tracker cannot be read here: {}",
                    e.message
                ))
            })?
            .owned)
    }

    /// A tracker policy refusal, logged once with its reason, role, tool
    /// and principal.
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

    /// Counts a tracker call against its caller's budget; other calls are
    /// not counted.
    pub(crate) fn count(
        &self,
        plan: Option<&Plan>,
        tool: &str,
        background: bool,
    ) -> Result<Option<tracker::Counted>, ClankieError> {
        let Some(p) = plan else {
            return Ok(None);
        };
        let class = if background {
            clankie_types::host::BudgetClass::Background
        } else {
            clankie_types::host::BudgetClass::Interactive
        };
        self.inner
            .budgets
            .admit(&p.caller.actor, p.caller.role, class, p.write, now_ms())
            .map_err(|e| self.policy_refused(e, &p.caller, tool))
    }
}
