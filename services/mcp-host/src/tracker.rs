//! The tracker account: the built-in vocabulary as account `linear`, the
//! role each call runs as, its profile, its route and its request budget.
//!
//! - **Role** comes from the hire ledger for every call (mailbox
//!   `ResolveCaller`), never from arguments: a confirmed lead hire is the
//!   lead, a confirmed reviewer hire the reviewer, anyone else a worker. The
//!   owner's route (the owner credential, no ticket) is the owner.
//! - **Profile**: limited roles (reviewer, worker) do not see the lead-only
//!   tools or arguments; calling them by name refuses `role_not_allowed`.
//! - **Route**: an explicit `repo` wins; then an item that belongs to the
//!   built-in store (an imported `TEAM-n`, `LOCAL-TEAM-n` or UUID) goes
//!   there, unless a read asks for `linearHistory`; then the caller's hire:
//!   its project's binding. Callers without a confirmed project hire keep the
//!   old routing: the connected Linear account, or the built-in store when
//!   none is connected.
//! - **Budget**: each limited principal has an interactive and a background
//!   class, each with 600 requests an hour and 60 writes a minute, counted
//!   exactly (a sliding log per window, under one lock). Refused calls are
//!   not counted and never reach the store.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::TrackerRoute;
use clankie_types::host::BudgetClass;
use clankie_types::vocabulary::{self, Role};
use serde_json::{Value, json};

use crate::catalog::AccountTools;

/// The account the vocabulary is published under.
pub const ACCOUNT: &str = "linear";
/// Requests per principal and class in [`REQUEST_WINDOW_MS`].
pub const REQUESTS_PER_HOUR: u32 = 600;
/// Writes per principal and class in [`WRITE_WINDOW_MS`].
pub const WRITES_PER_MINUTE: u32 = 60;
pub const REQUEST_WINDOW_MS: i64 = 3_600_000;
pub const WRITE_WINDOW_MS: i64 = 60_000;

/// The vocabulary as the catalog's built-in account.
pub fn builtin_tools() -> AccountTools {
    AccountTools {
        account: ACCOUNT.into(),
        generation: 0,
        builtin: true,
        tools: vocabulary::vocabulary()
            .iter()
            .map(|d| {
                let schema = match &d.schema {
                    Value::Object(m) => m.clone(),
                    _ => Default::default(),
                };
                (d.name.to_string(), d.description.clone(), Arc::new(schema))
            })
            .collect(),
    }
}

/// Parses the role names the mailbox answers with.
pub fn role_of(wire: i32) -> Role {
    // Unspecified (or a value this build does not know) is the least trusted.
    Role::from_wire(wire).unwrap_or(Role::Worker)
}

/// Whether a role may see a vocabulary tool, and the schema it sees.
pub fn visible_schema(tool: &str, role: Role) -> Option<Value> {
    vocabulary::find(tool).and_then(|d| vocabulary::schema_for(d, role))
}

/// The profile check: hidden tools and refused arguments.
pub fn check_profile(tool: &str, role: Role, args: &Value) -> Result<(), ClankieError> {
    vocabulary::check_profile(tool, role, args).map_err(|r| {
        ErrorCode::RoleNotAllowed
            .err(r.what)
            .with_details(json!({ "role": r.role.as_str(), "tool": r.tool }))
    })
}

/// Item references named by a call's arguments: identifiers (`TEAM-12`,
/// `LOCAL-TEAM-3`) and UUIDs, from the id-like fields of a vocabulary call,
/// or from every string of any other Linear call (a GraphQL document
/// included). At most 32.
pub fn references(args: &Value, vocabulary_call: bool) -> Vec<String> {
    fn is_identifier(t: &str) -> bool {
        let Some((key, n)) = t.rsplit_once('-') else {
            return false;
        };
        !key.is_empty()
            && key.len() <= 32
            && key.as_bytes()[0].is_ascii_uppercase()
            && key
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-')
            && !n.is_empty()
            && n.len() <= 9
            && n.bytes().all(|b| b.is_ascii_digit())
    }
    fn is_uuid(t: &str) -> bool {
        t.len() == 36
            && t.bytes().enumerate().all(|(i, b)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    b == b'-'
                } else {
                    b.is_ascii_hexdigit()
                }
            })
    }
    fn scan(text: &str, out: &mut Vec<String>) {
        for t in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if (is_identifier(t) || is_uuid(t)) && !out.iter().any(|o| o == t) && out.len() < 32 {
                out.push(t.to_string());
            }
        }
    }
    fn walk(v: &Value, out: &mut Vec<String>, depth: usize) {
        match v {
            Value::String(s) => scan(s, out),
            Value::Array(a) if depth < 4 => a.iter().for_each(|x| walk(x, out, depth + 1)),
            Value::Object(m) if depth < 4 => m.values().for_each(|x| walk(x, out, depth + 1)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if vocabulary_call {
        const KEYS: &[&str] = &[
            "id",
            "issueId",
            "parentId",
            "team",
            "teamId",
            "project",
            "projectId",
        ];
        if let Some(m) = args.as_object() {
            for k in KEYS {
                if let Some(Value::String(s)) = m.get(*k) {
                    let s = s.trim();
                    if (is_identifier(s) || is_uuid(s)) && !out.iter().any(|o| o == s) {
                        out.push(s.to_string());
                    }
                }
            }
        }
    } else {
        walk(args, &mut out, 0);
    }
    out
}

/// Whether a call routed to Linear is one the store holds for the route:
/// a project hire's `save_lease` (Linear keeps no leases). Callers without
/// a saved route keep the old routing.
pub fn holds_for_route(caller: &TrackerCaller, backend: &Backend, tool: &str) -> bool {
    tool == "save_lease"
        && caller.route == Some(TrackerRoute::Linear)
        && *backend == Backend::Linear { history: false }
}

/// Where one tracker call goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The built-in store.
    Store,
    /// The connected Linear account; `history` marks a frozen-copy read.
    Linear { history: bool },
}

/// The caller of one tracker call, as the host resolved it.
#[derive(Debug, Clone)]
pub struct TrackerCaller {
    pub role: Role,
    pub actor: String,
    /// The route the caller's hire (or `repo`) resolves to; none with a
    /// route problem (or from the owner's route).
    pub route: Option<TrackerRoute>,
    /// The built-in team of the routed project.
    pub route_team: String,
    pub route_problem: String,
    pub route_project: String,
}

/// Decides the backend of a vocabulary call. `owned` are the references the
/// built-in store owns; `linear_connected` whether a Linear account is
/// connected and verified.
pub fn route(
    caller: &TrackerCaller,
    explicit_repo: bool,
    owned: &[String],
    history: bool,
    write: bool,
    linear_connected: bool,
) -> Result<Backend, ClankieError> {
    if !explicit_repo && !owned.is_empty() {
        if history && !write {
            return Ok(Backend::Linear { history: true });
        }
        return Ok(Backend::Store);
    }
    if !caller.route_problem.is_empty() {
        return Err(ErrorCode::TrackerRouteUnavailable.err(caller.route_problem.clone()));
    }
    match caller.route {
        Some(TrackerRoute::Builtin) => Ok(Backend::Store),
        Some(TrackerRoute::Linear) => Ok(Backend::Linear { history: false }),
        // The owner's route, and callers without a confirmed project hire.
        _ if linear_connected && caller.role.limited() => Ok(Backend::Linear { history: false }),
        _ => Ok(Backend::Store),
    }
}

/// One sliding window: the times of the calls it counted.
#[derive(Debug)]
struct Window {
    limit: u32,
    span_ms: i64,
    stamps: VecDeque<i64>,
}

impl Window {
    fn new(limit: u32, span_ms: i64) -> Self {
        Window {
            limit,
            span_ms,
            stamps: VecDeque::new(),
        }
    }

    fn prune(&mut self, now: i64) {
        while self
            .stamps
            .front()
            .is_some_and(|&t| t + self.span_ms <= now)
        {
            self.stamps.pop_front();
        }
    }

    /// When the next call fits, when full now.
    fn full_until(&self) -> Option<i64> {
        (self.stamps.len() as u32 >= self.limit).then(|| {
            let k = self.stamps.len() - self.limit as usize;
            self.stamps[k] + self.span_ms
        })
    }

    fn view(&self) -> mcphost_pb::BudgetWindow {
        mcphost_pb::BudgetWindow {
            limit: self.limit,
            window_ms: self.span_ms as u64,
            used: self.stamps.len() as u32,
            retry_at_ms: self.full_until().unwrap_or(0),
        }
    }
}

#[derive(Debug)]
struct Account {
    role: Role,
    requests: Window,
    writes: Window,
    /// Refusal times within the request window.
    refused: VecDeque<i64>,
}

/// The per-actor request budgets.
#[derive(Default)]
pub struct Budgets {
    accounts: Mutex<HashMap<(String, BudgetClass), Account>>,
}

/// A counted call; handing it back uncounts it (the call was refused later,
/// before anything was dispatched).
pub struct Counted {
    key: (String, BudgetClass),
    at: i64,
    write: bool,
}

impl Budgets {
    /// Counts one call, or refuses it with `tracker_request_budget` and
    /// counts the refusal instead. Owner and lead calls are never counted.
    pub fn admit(
        &self,
        actor: &str,
        role: Role,
        class: BudgetClass,
        write: bool,
        now: i64,
    ) -> Result<Option<Counted>, ClankieError> {
        if !role.limited() {
            return Ok(None);
        }
        let mut accounts = self.accounts.lock();
        let key = (actor.to_string(), class);
        let a = accounts.entry(key.clone()).or_insert_with(|| Account {
            role,
            requests: Window::new(REQUESTS_PER_HOUR, REQUEST_WINDOW_MS),
            writes: Window::new(WRITES_PER_MINUTE, WRITE_WINDOW_MS),
            refused: VecDeque::new(),
        });
        a.role = role;
        a.requests.prune(now);
        a.writes.prune(now);
        while a
            .refused
            .front()
            .is_some_and(|&t| t + REQUEST_WINDOW_MS <= now)
        {
            a.refused.pop_front();
        }
        let full = match (
            a.requests.full_until(),
            write.then(|| a.writes.full_until()),
        ) {
            (Some(r), _) => Some((r, "requests", REQUESTS_PER_HOUR, "hour")),
            (None, Some(Some(w))) => Some((w, "writes", WRITES_PER_MINUTE, "minute")),
            _ => None,
        };
        if let Some((retry_at, what, limit, per)) = full {
            a.refused.push_back(now);
            crate::metrics::budget_refused(class.as_str());
            let retry_after = (retry_at - now).max(0);
            return Err(ErrorCode::RequestBudget
                .err(format!(
                    "this {} {} used its {limit} {what} per {per}; retry after {retry_after} ms",
                    role.as_str(),
                    class.as_str()
                ))
                .with_details(json!({
                    "retryAt": rfc3339_ms(retry_at),
                    "retryAtMs": retry_at,
                    "retryAfterMs": retry_after,
                    "window": what,
                    "class": class.as_str(),
                })));
        }
        a.requests.stamps.push_back(now);
        if write {
            a.writes.stamps.push_back(now);
        }
        Ok(Some(Counted {
            key,
            at: now,
            write,
        }))
    }

    /// Counts a policy refusal (role or route) against an actor's
    /// interactive window, without counting a request.
    pub fn note_refusal(&self, actor: &str, role: Role, now: i64) {
        if !role.limited() {
            return;
        }
        self.accounts
            .lock()
            .entry((actor.to_string(), BudgetClass::Interactive))
            .or_insert_with(|| Account {
                role,
                requests: Window::new(REQUESTS_PER_HOUR, REQUEST_WINDOW_MS),
                writes: Window::new(WRITES_PER_MINUTE, WRITE_WINDOW_MS),
                refused: VecDeque::new(),
            })
            .refused
            .push_back(now);
    }

    /// Uncounts a call that was refused after it was admitted.
    pub fn refund(&self, admitted: Counted) {
        if let Some(a) = self.accounts.lock().get_mut(&admitted.key) {
            if let Some(i) = a.requests.stamps.iter().rposition(|&t| t == admitted.at) {
                a.requests.stamps.remove(i);
            }
            if admitted.write
                && let Some(i) = a.writes.stamps.iter().rposition(|&t| t == admitted.at)
            {
                a.writes.stamps.remove(i);
            }
        }
    }

    /// Every counted actor's windows and refusals now.
    pub fn snapshot(&self, now: i64) -> Vec<mcphost_pb::ActorBudget> {
        let mut accounts = self.accounts.lock();
        let mut out: Vec<mcphost_pb::ActorBudget> = accounts
            .iter_mut()
            .map(|((actor, class), a)| {
                a.requests.prune(now);
                a.writes.prune(now);
                mcphost_pb::ActorBudget {
                    actor: actor.clone(),
                    role: a.role.wire(),
                    class: class.wire(),
                    requests: Some(a.requests.view()),
                    writes: Some(a.writes.view()),
                    refused: a
                        .refused
                        .iter()
                        .filter(|&&t| t + REQUEST_WINDOW_MS > now)
                        .count() as u32,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.actor, BudgetClass::wire_word(a.class))
                .cmp(&(&b.actor, BudgetClass::wire_word(b.class)))
        });
        out
    }
}

/// Milliseconds since the epoch as an RFC 3339 UTC timestamp.
pub fn rfc3339_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The schema size of the vocabulary each role sees.
pub fn profiles() -> Vec<mcphost_pb::RoleProfile> {
    [Role::Owner, Role::Lead, Role::Reviewer, Role::Worker]
        .into_iter()
        .map(|role| {
            let mut bytes = 0u64;
            let mut tools = 0u32;
            let mut hidden = Vec::new();
            for d in vocabulary::vocabulary() {
                match vocabulary::schema_for(d, role) {
                    Some(schema) => {
                        tools += 1;
                        let entry = json!({
                            "name": format!("{ACCOUNT}_{}", d.name),
                            "description": d.description,
                            "inputSchema": schema,
                        });
                        bytes += entry.to_string().len() as u64;
                    }
                    None => hidden.push(format!("{ACCOUNT}_{}", d.name)),
                }
            }
            mcphost_pb::RoleProfile {
                role: role.wire(),
                tools,
                schema_bytes: bytes,
                estimated_tokens: bytes / 4,
                hidden,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_role_the_mailbox_left_unspecified_or_unknown_is_the_least_trusted() {
        assert_eq!(role_of(0), Role::Worker);
        assert_eq!(role_of(99), Role::Worker);
        assert!(role_of(0).limited(), "it gets the limited profile");
        for r in [Role::Owner, Role::Lead, Role::Reviewer, Role::Worker] {
            assert_eq!(role_of(r.wire()), r);
        }
    }

    #[test]
    fn sixty_writes_a_minute_exactly_and_refusals_are_not_counted() {
        let b = Budgets::default();
        let t0 = 1_000_000;
        for i in 0..60 {
            assert!(
                b.admit("w", Role::Worker, BudgetClass::Interactive, true, t0 + i)
                    .expect("fits")
                    .is_some()
            );
        }
        let e = b
            .admit("w", Role::Worker, BudgetClass::Interactive, true, t0 + 100)
            .err()
            .expect("61st refused");
        assert_eq!(e.code, ErrorCode::RequestBudget);
        let d = e.details_json().expect("details");
        assert_eq!(d["retryAtMs"], t0 + WRITE_WINDOW_MS);
        assert_eq!(d["retryAfterMs"], WRITE_WINDOW_MS - 100);
        // Reads still fit; the other class is separate; a lead is free.
        assert!(
            b.admit("w", Role::Worker, BudgetClass::Interactive, false, t0 + 101)
                .is_ok()
        );
        assert!(
            b.admit("w", Role::Worker, BudgetClass::Background, true, t0 + 102)
                .is_ok()
        );
        assert!(
            b.admit("l", Role::Lead, BudgetClass::Interactive, true, t0)
                .expect("lead")
                .is_none()
        );
        // The first write leaves the window at t0 + 60 s: one more fits.
        assert!(
            b.admit(
                "w",
                Role::Worker,
                BudgetClass::Interactive,
                true,
                t0 + WRITE_WINDOW_MS
            )
            .is_ok()
        );
        let snap = b.snapshot(t0 + WRITE_WINDOW_MS);
        let w = snap
            .iter()
            .find(|a| a.actor == "w" && a.class == BudgetClass::Interactive.wire())
            .expect("w");
        assert_eq!(w.refused, 1);
        assert_eq!(w.requests.as_ref().expect("r").used, 62);
        assert_eq!(w.writes.as_ref().expect("w").used, 60);
    }

    #[test]
    fn six_hundred_requests_an_hour_and_refund() {
        let b = Budgets::default();
        let mut last = None;
        for i in 0..600 {
            last = b
                .admit("r", Role::Reviewer, BudgetClass::Background, false, i)
                .expect("fits");
        }
        assert!(
            b.admit("r", Role::Reviewer, BudgetClass::Background, false, 700)
                .is_err()
        );
        b.refund(last.expect("counted"));
        assert!(
            b.admit("r", Role::Reviewer, BudgetClass::Background, false, 701)
                .is_ok()
        );
    }

    #[test]
    fn references_and_routes() {
        assert_eq!(
            references(&json!({"id": "VUH-12", "title": "ENG-3"}), true),
            ["VUH-12"]
        );
        assert_eq!(
            references(
                &json!({"query": "mutation { commentCreate(input: {issueId: \"LOCAL-VUH-4\"}) }"}),
                false
            ),
            ["LOCAL-VUH-4"]
        );
        let worker = TrackerCaller {
            role: Role::Worker,
            actor: "hire:x".into(),
            route: Some(TrackerRoute::Linear),
            route_team: String::new(),
            route_problem: String::new(),
            route_project: "p".into(),
        };
        let owned = vec!["VUH-12".to_string()];
        assert_eq!(
            route(&worker, false, &owned, false, true, true).expect("r"),
            Backend::Store
        );
        assert_eq!(
            route(&worker, false, &owned, true, false, true).expect("r"),
            Backend::Linear { history: true }
        );
        assert_eq!(
            route(&worker, false, &[], false, true, true).expect("r"),
            Backend::Linear { history: false }
        );
        let broken = TrackerCaller {
            route: None,
            route_problem: "no binding".into(),
            ..worker
        };
        assert_eq!(
            route(&broken, false, &[], false, false, true)
                .expect_err("refused")
                .code,
            ErrorCode::TrackerRouteUnavailable
        );
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_798_675_200_123), "2026-12-31T00:00:00.123Z");
    }
}
