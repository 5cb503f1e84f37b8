//! The tool dispatcher: runs one vocabulary tool against the store.
//!
//! The host has already resolved the caller's role, checked its profile and
//! validated the arguments against the role's schema. This layer still
//! refuses profile violations itself ([`StoreError::NotAllowed`]) and parses
//! arguments strictly (unknown fields are invalid) after dropping the
//! routing-only `repo` and `linearHistory`. Results are always JSON objects;
//! every write result carries `replayed`.

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value, json};

pub use crate::store::Caller;
use crate::store::{
    IssueQuery, PostBundleCheck, PostInboxAnswer, PostIssueAsk, PostIssueEvent, PostReviewComment,
    PostStepResult, ProjectQuery, RetireReview, ReviewRef, RunControl, SaveComment,
    SaveEvidenceBundle, SaveGuidedReview, SaveGuidedReviewStep, SaveInboxItem, SaveIssue,
    SaveIssueStatus, SaveLabel, SaveLease, SaveProject, SaveRun, SaveStatusUpdate, Store,
    StoreError, Written,
};
use crate::vocabulary::{self, MAX_CHANGES_LIMIT, MAX_WAIT_MS, PROJECT_STATUSES, STATES};

/// Keys the host uses for routing; the store ignores them.
const ROUTING_KEYS: &[&str] = &["repo", "linearHistory"];

/// Runs one tool as `caller`. `args` is the JSON object the caller sent.
pub fn invoke(
    store: &mut Store,
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    let mut args = match args {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        _ => {
            return Err(StoreError::Invalid(format!(
                "arguments for {tool} must be a JSON object"
            )));
        }
    };
    for k in ROUTING_KEYS {
        args.remove(*k);
    }
    let args = Value::Object(args);
    if vocabulary::find(tool).is_none() {
        return Err(StoreError::Invalid(format!("unknown tool {tool}")));
    }
    vocabulary::check_profile(tool, caller.role, &args).map_err(|r| StoreError::NotAllowed {
        role: r.role,
        what: r.what,
    })?;
    let me = caller.actor.as_str();
    match tool {
        // Issues.
        "get_issue" => {
            let a: GetIssue = parse(tool, args)?;
            let issue = store.issue(&a.id)?;
            if a.include_relations.unwrap_or(false) {
                let parent = match &issue.parent_id {
                    Some(p) => Some(store.issue(p)?),
                    None => None,
                };
                let children = store.children(&issue.id)?;
                Ok(json!({"issue": issue, "relations": {"parent": parent, "children": children}}))
            } else {
                Ok(json!({ "issue": issue }))
            }
        }
        "list_issues" => {
            let a: ListIssues = parse(tool, args)?;
            let q = IssueQuery {
                team: a.team,
                state: a.state,
                assignee: a.assignee,
                label: a.label,
                project: a.project,
                cycle: a.cycle,
                parent: a.parent_id,
                text: a.query,
                limit: a.limit,
                cursor: a.cursor,
                order_by_created: a.order_by.as_deref() == Some("createdAt"),
            };
            issues_page(store.query_issues(&q, me)?)
        }
        "search_issues" => {
            let a: SearchIssues = parse(tool, args)?;
            if a.query.trim().is_empty() {
                return Err(StoreError::Invalid("query is required".into()));
            }
            let q = IssueQuery {
                team: a.team,
                state: a.state,
                text: Some(a.query),
                limit: a.limit,
                cursor: a.cursor,
                ..Default::default()
            };
            issues_page(store.query_issues(&q, me)?)
        }
        "save_issue" => {
            let a: SaveIssue = parse(tool, args)?;
            written("issue", store.save_issue_as(caller, a)?)
        }
        "save_issue_status" => {
            let a: SaveIssueStatus = parse(tool, args)?;
            written("issue", store.save_issue_status(caller, a)?)
        }
        "list_comments" => {
            let a: IssueList = parse(tool, args)?;
            let mut comments = store.comments(&a.issue_id)?;
            comments.truncate(limit(a.limit));
            Ok(json!({ "comments": comments }))
        }
        "save_comment" => {
            let a: SaveComment = parse(tool, args)?;
            written("comment", store.save_comment_as(caller, tool, a)?)
        }
        "create_comment" => {
            let a: CreateComment = parse(tool, args)?;
            let input = SaveComment {
                issue_id: Some(a.issue_id),
                body: a.body,
                idempotency_key: a.idempotency_key,
                ..Default::default()
            };
            written("comment", store.save_comment_as(caller, tool, input)?)
        }
        "list_issue_statuses" => {
            let a: TeamFilter = parse(tool, args)?;
            if let Some(t) = &a.team {
                store.team(t)?;
            }
            let statuses: Vec<Value> = STATES
                .iter()
                .enumerate()
                .map(|(i, (name, kind))| json!({"name": name, "type": kind, "position": i}))
                .collect();
            Ok(json!({ "statuses": statuses }))
        }
        "list_issue_labels" => {
            let a: ListLabels = parse(tool, args)?;
            Ok(json!({"labels": store.labels(a.team.as_deref(), a.query.as_deref(), a.limit)?}))
        }
        "save_issue_label" => {
            let a: SaveLabel = parse(tool, args)?;
            written("label", store.save_label(caller, tool, a)?)
        }
        "create_issue_label" => {
            let a: CreateLabel = parse(tool, args)?;
            let input = SaveLabel {
                name: Some(a.name),
                color: a.color,
                description: a.description,
                team_id: a.team_id,
                idempotency_key: a.idempotency_key,
                ..Default::default()
            };
            written("label", store.save_label(caller, tool, input)?)
        }

        // Projects and planning.
        "get_project" => {
            let a: Query = parse(tool, args)?;
            Ok(json!({"project": store.project(&a.query)?}))
        }
        "list_projects" => {
            let a: ListProjects = parse(tool, args)?;
            if let Some(s) = &a.state
                && !PROJECT_STATUSES.contains(&s.as_str())
            {
                return Err(StoreError::Invalid(format!("unknown project status {s}")));
            }
            let page = store.projects(&ProjectQuery {
                team: a.team,
                state: a.state,
                text: a.query,
                limit: a.limit,
                cursor: a.cursor,
            })?;
            Ok(json!({"projects": page.items, "cursor": page.cursor, "hasMore": page.has_more}))
        }
        "save_project" => {
            let a: SaveProject = parse(tool, args)?;
            written("project", store.save_project(caller, a)?)
        }
        "list_project_statuses" => {
            let _: Empty = parse(tool, args)?;
            let statuses: Vec<Value> = PROJECT_STATUSES
                .iter()
                .enumerate()
                .map(|(i, name)| json!({"name": name, "position": i}))
                .collect();
            Ok(json!({ "statuses": statuses }))
        }
        "get_status_updates" => {
            let a: GetStatusUpdates = parse(tool, args)?;
            let updates =
                store.status_updates(a.project_id.as_deref(), a.id.as_deref(), a.limit)?;
            Ok(json!({ "statusUpdates": updates }))
        }
        "save_status_update" => {
            let a: SaveStatusUpdate = parse(tool, args)?;
            written("statusUpdate", store.save_status_update(caller, a)?)
        }
        "list_milestones" => {
            let a: ListMilestones = parse(tool, args)?;
            Ok(json!({"milestones": store.milestones(a.project.as_deref(), a.limit)?}))
        }
        "get_milestone" => {
            let a: Id = parse(tool, args)?;
            Ok(json!({"milestone": store.milestone(&a.id)?}))
        }
        "list_initiatives" => {
            let a: ListInitiatives = parse(tool, args)?;
            let list = store.initiatives(a.query.as_deref(), a.status.as_deref(), a.limit)?;
            Ok(json!({ "initiatives": list }))
        }
        "get_document" => {
            let a: Id = parse(tool, args)?;
            Ok(json!({"document": store.document(&a.id)?}))
        }
        "list_documents" => {
            let a: ListDocuments = parse(tool, args)?;
            let docs = store.documents(
                a.project.as_deref(),
                a.issue_id.as_deref(),
                a.query.as_deref(),
                a.limit,
            )?;
            Ok(json!({ "documents": docs }))
        }
        "list_cycles" => {
            let a: ListCycles = parse(tool, args)?;
            Ok(json!({"cycles": store.cycles(a.team_id.as_deref(), a.kind.as_deref())?}))
        }
        "get_cycle" => {
            let a: Id = parse(tool, args)?;
            Ok(json!({"cycle": store.cycle(&a.id)?}))
        }
        "list_releases" => {
            let a: Limit = parse(tool, args)?;
            Ok(json!({"releases": store.releases(a.limit)?}))
        }
        "get_release" => {
            let a: Id = parse(tool, args)?;
            Ok(json!({"release": store.release(&a.id)?}))
        }

        // Directory and logs.
        "get_user" => {
            let a: Query = parse(tool, args)?;
            Ok(json!({"user": store.user(me, &a.query)?}))
        }
        "list_users" => {
            let a: QueryLimit = parse(tool, args)?;
            Ok(json!({"users": store.users(me, a.query.as_deref(), a.limit)?}))
        }
        "get_team" => {
            let a: Query = parse(tool, args)?;
            Ok(json!({"team": store.team(&a.query)?}))
        }
        "list_teams" => {
            let a: QueryLimit = parse(tool, args)?;
            Ok(json!({"teams": store.teams(a.query.as_deref(), a.limit)?}))
        }
        "get_write_receipt" => {
            let a: GetReceipt = parse(tool, args)?;
            Ok(json!({"receipt": store.write_receipt(me, &a.idempotency_key)?}))
        }
        "list_audit_events" => {
            let a: ListAudit = parse(tool, args)?;
            let events = store.audit_events(a.actor.as_deref(), a.cursor, a.limit)?;
            let cursor = events.last().map(|e| e.seq);
            Ok(json!({ "events": events, "cursor": cursor }))
        }
        "list_changes" => {
            let a: ListChanges = parse(tool, args)?;
            let after = a.cursor.unwrap_or(0);
            if after < 0 {
                return Err(StoreError::Invalid("cursor is 0 or more".into()));
            }
            let n = a.limit.unwrap_or(100);
            if !(1..=MAX_CHANGES_LIMIT).contains(&n) {
                return Err(StoreError::Invalid(format!(
                    "limit is 1 to {MAX_CHANGES_LIMIT}"
                )));
            }
            if let Some(w) = a.wait_ms
                && !(0..=MAX_WAIT_MS).contains(&w)
            {
                return Err(StoreError::Invalid(format!("waitMs is 0 to {MAX_WAIT_MS}")));
            }
            let changes = store.changes(after, n as usize)?;
            let cursor = changes.last().map_or(after, |c| c.seq);
            Ok(json!({ "changes": changes, "cursor": cursor }))
        }

        // The work loop.
        "post_issue_event" => {
            let a: PostIssueEvent = parse(tool, args)?;
            written("event", store.post_issue_event(caller, a)?)
        }
        "list_issue_events" => {
            let a: ListIssueEvents = parse(tool, args)?;
            let events = store.issue_events(&a.issue_id, a.stage.as_deref(), a.limit)?;
            Ok(json!({ "events": events }))
        }
        "save_lease" => {
            let a: SaveLease = parse(tool, args)?;
            flat(store.save_lease(caller, a)?)
        }
        "list_ready_issues" => {
            let a: TeamLimit = parse(tool, args)?;
            Ok(json!({"issues": store.ready_issues(a.team.as_deref(), a.limit)?}))
        }
        "list_drift" => {
            let a: TeamLimit = parse(tool, args)?;
            Ok(json!({"drift": store.drift(a.team.as_deref(), a.limit)?}))
        }
        "save_run" => {
            let a: SaveRun = parse(tool, args)?;
            written("run", store.save_run(caller, a)?)
        }
        "list_runs" => {
            let a: ListRuns = parse(tool, args)?;
            let runs = store.runs(a.issue_id.as_deref(), a.status.as_deref(), a.limit)?;
            Ok(json!({ "runs": runs }))
        }
        "post_run_control" => {
            let a: RunControl = parse(tool, args)?;
            written("run", store.post_run_control(caller, a)?)
        }
        "save_evidence_bundle" => {
            let a: SaveEvidenceBundle = parse(tool, args)?;
            written("bundle", store.save_evidence_bundle(caller, a)?)
        }
        "get_evidence_bundle" => {
            let a: Id = parse(tool, args)?;
            let bundle = store.evidence_bundle(&a.id)?;
            let checks = store.bundle_checks(&bundle.id)?;
            Ok(json!({ "bundle": bundle, "checks": checks }))
        }
        "post_bundle_check" => {
            let a: PostBundleCheck = parse(tool, args)?;
            written("check", store.post_bundle_check(caller, a)?)
        }
        "post_issue_ask" => {
            let a: PostIssueAsk = parse(tool, args)?;
            written("ask", store.post_issue_ask(caller, a)?)
        }

        // Guided reviews.
        "save_guided_review" => {
            let a: SaveGuidedReview = parse(tool, args)?;
            written("review", store.save_guided_review(caller, a)?)
        }
        "get_guided_review" => {
            let a: Id = parse(tool, args)?;
            let review = store.guided_review(&a.id)?;
            let steps = store.guided_review_steps(&review.id)?;
            Ok(json!({ "review": review, "steps": steps }))
        }
        "list_guided_reviews" => {
            let a: ListReviews = parse(tool, args)?;
            let reviews =
                store.guided_reviews(a.issue_id.as_deref(), a.state.as_deref(), a.limit)?;
            Ok(json!({ "reviews": reviews }))
        }
        "save_guided_review_step" => {
            let a: SaveGuidedReviewStep = parse(tool, args)?;
            written("step", store.save_guided_review_step(caller, a)?)
        }
        "list_guided_review_steps" => {
            let a: ReviewArg = parse(tool, args)?;
            Ok(json!({"steps": store.guided_review_steps(&a.review_id)?}))
        }
        "post_guided_review_step_result" => {
            let a: PostStepResult = parse(tool, args)?;
            written("step", store.post_guided_review_step_result(caller, a)?)
        }
        "post_guided_review_comment" => {
            let a: PostReviewComment = parse(tool, args)?;
            written("comment", store.post_guided_review_comment(caller, a)?)
        }
        "list_guided_review_comments" => {
            let a: ReviewArg = parse(tool, args)?;
            Ok(json!({"comments": store.guided_review_comments(&a.review_id)?}))
        }
        "post_guided_review_submit" => {
            let a: ReviewRef = parse(tool, args)?;
            written("review", store.post_guided_review_submit(caller, a)?)
        }
        "list_guided_review_events" => {
            let a: ReviewArg = parse(tool, args)?;
            Ok(json!({"events": store.guided_review_events(&a.review_id)?}))
        }
        "post_retire_guided_review" => {
            let a: RetireReview = parse(tool, args)?;
            written("review", store.post_retire_guided_review(caller, a)?)
        }

        // The lead's inbox.
        "list_inbox" => {
            let a: ListInbox = parse(tool, args)?;
            let items = store.inbox(a.include_resolved.unwrap_or(false), a.limit)?;
            Ok(json!({ "items": items }))
        }
        "get_inbox_item" => {
            let a: Id = parse(tool, args)?;
            let (item, target) = store.inbox_item(&a.id)?;
            let mut out = Map::new();
            out.insert("item".into(), serde_json::to_value(item)?);
            if let Value::Object(t) = serde_json::to_value(target)? {
                out.extend(t);
            }
            Ok(Value::Object(out))
        }
        "save_inbox_item" => {
            let a: SaveInboxItem = parse(tool, args)?;
            written("item", store.save_inbox_item(caller, a)?)
        }
        "post_inbox_answer" => {
            let a: PostInboxAnswer = parse(tool, args)?;
            flat(store.post_inbox_answer(caller, a)?)
        }
        other => Err(StoreError::Invalid(format!(
            "tool {other} has no store implementation"
        ))),
    }
}

/// Parses a tool's arguments strictly.
fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, StoreError> {
    serde_json::from_value(args)
        .map_err(|e| StoreError::Invalid(format!("arguments for {tool}: {e}")))
}

/// `{key: value, replayed}`.
fn written<T: Serialize>(key: &str, w: Written<T>) -> Result<Value, StoreError> {
    Ok(json!({ key: serde_json::to_value(w.value)?, "replayed": w.replayed }))
}

/// The value's own fields plus `replayed`.
fn flat<T: Serialize>(w: Written<T>) -> Result<Value, StoreError> {
    let mut out = match serde_json::to_value(w.value)? {
        Value::Object(m) => m,
        other => {
            let mut m = Map::new();
            m.insert("value".into(), other);
            m
        }
    };
    out.insert("replayed".into(), w.replayed.into());
    Ok(Value::Object(out))
}

fn issues_page(page: crate::store::Page<crate::store::Issue>) -> Result<Value, StoreError> {
    Ok(json!({"issues": page.items, "cursor": page.cursor, "hasMore": page.has_more}))
}

fn limit(l: Option<i64>) -> usize {
    l.unwrap_or(50).clamp(1, vocabulary::MAX_LIMIT) as usize
}

// Argument shapes of the read tools (writes use the store's input types).

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Id {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    query: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryLimit {
    query: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Limit {
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TeamFilter {
    team: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TeamLimit {
    team: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GetIssue {
    id: String,
    include_relations: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListIssues {
    team: Option<String>,
    state: Option<String>,
    assignee: Option<String>,
    label: Option<String>,
    project: Option<String>,
    cycle: Option<String>,
    parent_id: Option<String>,
    query: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
    order_by: Option<String>,
    #[allow(dead_code)]
    include_archived: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SearchIssues {
    query: String,
    team: Option<String>,
    state: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
    #[allow(dead_code)]
    include_archived: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IssueList {
    issue_id: String,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateComment {
    issue_id: String,
    body: String,
    idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListLabels {
    team: Option<String>,
    query: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateLabel {
    name: String,
    color: Option<String>,
    description: Option<String>,
    team_id: Option<String>,
    idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListProjects {
    team: Option<String>,
    state: Option<String>,
    query: Option<String>,
    limit: Option<i64>,
    cursor: Option<String>,
    #[allow(dead_code)]
    include_archived: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GetStatusUpdates {
    project_id: Option<String>,
    id: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListMilestones {
    project: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListInitiatives {
    query: Option<String>,
    status: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListDocuments {
    project: Option<String>,
    issue_id: Option<String>,
    query: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListCycles {
    team_id: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GetReceipt {
    idempotency_key: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListAudit {
    actor: Option<String>,
    cursor: Option<i64>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListChanges {
    cursor: Option<i64>,
    limit: Option<i64>,
    /// The service layer waits; the store only validates it.
    wait_ms: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListIssueEvents {
    issue_id: String,
    stage: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListRuns {
    issue_id: Option<String>,
    status: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListReviews {
    issue_id: Option<String>,
    state: Option<String>,
    limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReviewArg {
    review_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListInbox {
    include_resolved: Option<bool>,
    limit: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::Role;

    struct Fx {
        _dir: tempfile::TempDir,
        store: Store,
        lead: Caller,
        owner: Caller,
        w1: Caller,
        w2: Caller,
        reviewer: Caller,
    }

    fn fx() -> Fx {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("tracker")).expect("open");
        store
            .create_team("ENG", "Engineering", "clankie")
            .expect("team");
        Fx {
            _dir: dir,
            store,
            lead: Caller::new("clankie", Role::Lead),
            owner: Caller::new("james", Role::Owner),
            w1: Caller::new("w1", Role::Worker),
            w2: Caller::new("w2", Role::Worker),
            reviewer: Caller::new("rev", Role::Reviewer),
        }
    }

    /// Calls a tool the way the host does: the arguments must match the
    /// schema the caller's role sees, then the store runs it.
    fn call(
        store: &mut Store,
        caller: &Caller,
        tool: &str,
        args: Value,
    ) -> Result<Value, StoreError> {
        let def = vocabulary::find(tool).expect("a vocabulary tool");
        let schema = vocabulary::schema_for(def, caller.role).expect("visible to the role");
        let v = jsonschema::validator_for(&schema).expect("compiles");
        if let Err(e) = v.validate(&args) {
            panic!(
                "{tool} {args} does not match its schema for {}: {e}",
                caller.role
            );
        }
        invoke(store, caller, tool, args)
    }

    fn ok(store: &mut Store, caller: &Caller, tool: &str, args: Value) -> Value {
        call(store, caller, tool, args.clone())
            .unwrap_or_else(|e| panic!("{tool} {args} as {}: {e}", caller.actor))
    }

    fn s(v: &Value) -> String {
        v.as_str().expect("a string").to_string()
    }

    fn not_allowed(r: Result<Value, StoreError>, role: Role) -> String {
        match r {
            Err(StoreError::NotAllowed { role: r, what }) => {
                assert_eq!(r, role);
                assert!(what.contains(role.as_str()), "{what}");
                what
            }
            other => panic!("expected NotAllowed, got {other:?}"),
        }
    }

    #[test]
    fn every_tool_is_dispatched_and_unknown_tools_are_invalid() {
        let mut f = fx();
        for def in vocabulary::vocabulary() {
            let r = invoke(&mut f.store, &f.lead, def.name, json!({}));
            if let Err(StoreError::Invalid(m)) = &r {
                assert!(!m.contains("no store implementation"), "{}: {m}", def.name);
            }
        }
        assert!(matches!(
            invoke(&mut f.store, &f.lead, "drop_tables", json!({})),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            invoke(&mut f.store, &f.lead, "get_issue", json!([1])),
            Err(StoreError::Invalid(_))
        ));
        // Unknown arguments are refused even past the host.
        assert!(matches!(
            invoke(&mut f.store, &f.lead, "list_teams", json!({"bogus": 1})),
            Err(StoreError::Invalid(_))
        ));
    }

    #[test]
    fn issues_round_trip_with_updates_comments_and_relations() {
        let mut f = fx();
        let st = &mut f.store;
        let created = ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "eng", "title": "Fix login", "priority": 2, "assignee": "me",
                   "labels": ["bug", "Bug", " "], "repo": "kh2"}),
        );
        assert_eq!(created["replayed"], false);
        let issue = &created["issue"];
        assert_eq!(issue["identifier"], "ENG-1");
        assert_eq!(issue["assignee"], "w1");
        assert_eq!(issue["labels"], json!(["bug"]));
        assert_eq!(issue["state"], "Backlog");
        let id = s(&issue["id"]);
        let child = ok(
            st,
            &f.w2,
            "save_issue",
            json!({"team": "ENG", "title": "Sub-task", "parentId": "eng-1", "state": "Todo"}),
        );
        assert_eq!(child["issue"]["parentId"], Value::from(id.clone()));
        let got = ok(
            st,
            &f.w2,
            "get_issue",
            json!({"id": "ENG-1", "includeRelations": true, "linearHistory": false}),
        );
        assert_eq!(got["issue"]["title"], "Fix login");
        assert_eq!(got["relations"]["children"][0]["identifier"], "ENG-2");
        // A parent cannot become its own descendant.
        assert!(matches!(
            call(
                st,
                &f.w1,
                "save_issue",
                json!({"id": "ENG-1", "parentId": "ENG-2"})
            ),
            Err(StoreError::Invalid(_))
        ));

        let updated_at = issue["updatedAt"].as_i64().expect("updatedAt");
        let moved = ok(
            st,
            &f.w1,
            "save_issue",
            json!({"id": "ENG-1", "state": "In Progress", "ifUpdatedAt": updated_at}),
        );
        assert_eq!(moved["issue"]["stateType"], "started");
        let before = st.cursor().expect("cursor");
        assert!(matches!(
            call(
                st,
                &f.w2,
                "save_issue",
                json!({"id": id, "title": "x", "ifUpdatedAt": updated_at})
            ),
            Err(StoreError::Conflict(_))
        ));
        assert_eq!(
            st.cursor().expect("cursor"),
            before,
            "a conflict writes nothing"
        );

        let mine = ok(st, &f.w1, "list_issues", json!({"assignee": "me"}));
        assert_eq!(mine["issues"].as_array().expect("issues").len(), 1);
        let started = ok(st, &f.w1, "list_issues", json!({"state": "started"}));
        assert_eq!(started["issues"][0]["identifier"], "ENG-1");
        let todo = ok(
            st,
            &f.w1,
            "list_issues",
            json!({"state": "todo", "label": "nope"}),
        );
        assert!(todo["issues"].as_array().expect("issues").is_empty());
        let bugs = ok(st, &f.w1, "list_issues", json!({"label": "BUG"}));
        assert_eq!(bugs["issues"].as_array().expect("issues").len(), 1);
        let found = ok(st, &f.w2, "search_issues", json!({"query": "LOGIN"}));
        assert_eq!(found["issues"][0]["identifier"], "ENG-1");
        let kids = ok(st, &f.w2, "list_issues", json!({"parentId": "ENG-1"}));
        assert_eq!(kids["issues"][0]["identifier"], "ENG-2");

        // Paging: one at a time, newest created first, then the end.
        let p1 = ok(
            st,
            &f.w1,
            "list_issues",
            json!({"limit": 1, "orderBy": "createdAt"}),
        );
        assert_eq!(p1["issues"][0]["identifier"], "ENG-2");
        assert_eq!(p1["hasMore"], true);
        let p2 = ok(
            st,
            &f.w1,
            "list_issues",
            json!({"limit": 1, "orderBy": "createdAt", "cursor": p1["cursor"].clone()}),
        );
        assert_eq!(p2["issues"][0]["identifier"], "ENG-1");
        assert_eq!(p2["hasMore"], false);
        assert_eq!(p2["cursor"], Value::Null);

        let c = ok(
            st,
            &f.w1,
            "create_comment",
            json!({"issueId": "ENG-1", "body": "on it"}),
        );
        let cid = s(&c["comment"]["id"]);
        let edited = ok(
            st,
            &f.w1,
            "save_comment",
            json!({"id": cid, "body": "done soon"}),
        );
        assert_eq!(edited["comment"]["body"], "done soon");
        not_allowed(
            call(
                st,
                &f.w2,
                "save_comment",
                json!({"id": cid, "body": "hijack"}),
            ),
            Role::Worker,
        );
        ok(
            st,
            &f.lead,
            "save_comment",
            json!({"id": cid, "body": "lead edit"}),
        );
        ok(
            st,
            &f.w2,
            "save_comment",
            json!({"issueId": "ENG-1", "body": "second"}),
        );
        let comments = ok(st, &f.w2, "list_comments", json!({"issueId": "ENG-1"}));
        let bodies: Vec<String> = comments["comments"]
            .as_array()
            .expect("comments")
            .iter()
            .map(|c| s(&c["body"]))
            .collect();
        assert_eq!(bodies, ["lead edit", "second"]);
        assert!(matches!(
            call(st, &f.w1, "get_issue", json!({"id": "ENG-99"})),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn the_store_refuses_what_limited_roles_may_not_do_and_writes_nothing() {
        let mut f = fx();
        let st = &mut f.store;
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": "t"}),
        );
        let before = st.cursor().expect("cursor");
        let writes = st.count_writes("w1").expect("writes");
        // Straight to the store, past the host's schema and profile.
        let w = not_allowed(
            invoke(
                st,
                &f.w1,
                "save_issue_status",
                json!({"id": "ENG-1", "state": "Done"}),
            ),
            Role::Worker,
        );
        assert_eq!(w, "save_issue_status is not available to the worker role");
        not_allowed(
            invoke(
                st,
                &f.w1,
                "save_issue",
                json!({"id": "ENG-1", "state": "Done"}),
            ),
            Role::Worker,
        );
        not_allowed(
            invoke(
                st,
                &f.reviewer,
                "save_issue",
                json!({"id": "ENG-1", "cycle": null}),
            ),
            Role::Reviewer,
        );
        not_allowed(
            invoke(
                st,
                &f.w1,
                "post_issue_event",
                json!({"issueId": "ENG-1", "stage": "owner-verified"}),
            ),
            Role::Worker,
        );
        for tool in [
            "save_project",
            "post_run_control",
            "list_inbox",
            "post_retire_guided_review",
        ] {
            not_allowed(invoke(st, &f.reviewer, tool, json!({})), Role::Reviewer);
        }
        // The typed store API refuses on its own, without the dispatcher.
        let r = st.save_issue_as(
            &f.w1,
            crate::store::SaveIssue {
                id: Some("ENG-1".into()),
                state: Some("done".into()),
                ..Default::default()
            },
        );
        assert!(matches!(
            r,
            Err(StoreError::NotAllowed {
                role: Role::Worker,
                ..
            })
        ));
        let r = st.save_issue_status(
            &f.w1,
            SaveIssueStatus {
                id: "ENG-1".into(),
                state: "Done".into(),
                ..Default::default()
            },
        );
        assert!(matches!(r, Err(StoreError::NotAllowed { .. })));
        assert_eq!(
            st.cursor().expect("cursor"),
            before,
            "refusals write nothing"
        );
        assert_eq!(st.count_writes("w1").expect("writes"), writes);

        // The lead and the owner may.
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"id": "ENG-1", "state": "In Review"}),
        );
        let inbox = ok(st, &f.lead, "list_inbox", json!({}));
        assert_eq!(inbox["items"][0]["kind"], "owner-verification");
        let done = ok(
            st,
            &f.lead,
            "save_issue_status",
            json!({"id": "ENG-1", "state": "Done"}),
        );
        assert_eq!(done["issue"]["stateType"], "completed");
        let drift = ok(st, &f.lead, "list_drift", json!({}));
        assert_eq!(drift["drift"][0]["reason"], "completed-unverified");
        ok(
            st,
            &f.owner,
            "post_issue_event",
            json!({"issueId": "ENG-1", "stage": "owner-verified", "body": "checked on the phone"}),
        );
        let drift = ok(st, &f.lead, "list_drift", json!({}));
        assert!(drift["drift"].as_array().expect("drift").is_empty());
        let inbox = ok(st, &f.lead, "list_inbox", json!({}));
        assert!(inbox["items"].as_array().expect("items").is_empty());
        ok(
            st,
            &f.lead,
            "save_issue",
            json!({"id": "ENG-1", "cycle": ""}),
        );
    }

    #[test]
    fn a_repeated_idempotency_key_replays_and_writes_nothing() {
        let mut f = fx();
        let st = &mut f.store;
        let args = json!({"team": "ENG", "title": "once", "idempotencyKey": "k-1"});
        let first = ok(st, &f.w1, "save_issue", args.clone());
        let cursor = st.cursor().expect("cursor");
        let writes = st.count_writes("w1").expect("writes");
        let again = ok(st, &f.w1, "save_issue", args.clone());
        assert_eq!(again["replayed"], true);
        assert_eq!(again["issue"], first["issue"]);
        assert_eq!(st.cursor().expect("cursor"), cursor, "no change logged");
        assert_eq!(
            st.count_writes("w1").expect("writes"),
            writes,
            "no audit row"
        );
        let receipt = ok(
            st,
            &f.w1,
            "get_write_receipt",
            json!({"idempotencyKey": "k-1"}),
        );
        assert_eq!(receipt["receipt"]["tool"], "save_issue");
        assert_eq!(receipt["receipt"]["result"]["identifier"], "ENG-1");
        assert!(matches!(
            call(
                st,
                &f.w2,
                "get_write_receipt",
                json!({"idempotencyKey": "k-1"})
            ),
            Err(StoreError::NotFound(_))
        ));
        // The same key on another tool is a conflict, not a replay.
        assert!(matches!(
            call(
                st,
                &f.w1,
                "create_comment",
                json!({"issueId": "ENG-1", "body": "b", "idempotencyKey": "k-1"})
            ),
            Err(StoreError::Conflict(_))
        ));
        // Aliases share their tool's keys.
        let c = ok(
            st,
            &f.w1,
            "create_comment",
            json!({"issueId": "ENG-1", "body": "b", "idempotencyKey": "c-1"}),
        );
        let c2 = ok(
            st,
            &f.w1,
            "save_comment",
            json!({"issueId": "ENG-1", "body": "b", "idempotencyKey": "c-1"}),
        );
        assert_eq!(c2["replayed"], true);
        assert_eq!(c2["comment"], c["comment"]);
        // Other tool families replay too.
        let e1 = ok(
            st,
            &f.w1,
            "post_issue_event",
            json!({"issueId": "ENG-1", "stage": "claimed", "idempotencyKey": "e"}),
        );
        let cursor = st.cursor().expect("cursor");
        let e2 = ok(
            st,
            &f.w1,
            "post_issue_event",
            json!({"issueId": "ENG-1", "stage": "claimed", "idempotencyKey": "e"}),
        );
        assert_eq!(e2["replayed"], true);
        assert_eq!(e1["event"], e2["event"]);
        assert_eq!(st.cursor().expect("cursor"), cursor);
        let l1 = ok(
            st,
            &f.w1,
            "save_lease",
            json!({"issueId": "ENG-1", "ttlMs": 60000, "idempotencyKey": "l"}),
        );
        let l2 = ok(
            st,
            &f.w1,
            "save_lease",
            json!({"issueId": "ENG-1", "ttlMs": 60000, "idempotencyKey": "l"}),
        );
        assert_eq!(l2["replayed"], true);
        assert_eq!(l1["lease"], l2["lease"]);
    }

    #[test]
    fn leases_conflict_until_they_expire() {
        let mut f = fx();
        let st = &mut f.store;
        for (title, priority) in [("low", 4), ("none", 0), ("urgent", 1)] {
            ok(
                st,
                &f.lead,
                "save_issue",
                json!({"team": "ENG", "title": title, "state": "Todo", "priority": priority}),
            );
        }
        ok(
            st,
            &f.lead,
            "save_issue",
            json!({"team": "ENG", "title": "backlog"}),
        );
        let ready = ok(st, &f.w1, "list_ready_issues", json!({"team": "ENG"}));
        let order: Vec<String> = ready["issues"]
            .as_array()
            .expect("issues")
            .iter()
            .map(|i| s(&i["title"]))
            .collect();
        assert_eq!(order, ["urgent", "low", "none"]);

        let taken = ok(
            st,
            &f.w1,
            "save_lease",
            json!({"issueId": "ENG-3", "ttlMs": 60000}),
        );
        assert_eq!(taken["lease"]["holder"], "w1");
        assert_eq!(taken["released"], false);
        let ready = ok(st, &f.w2, "list_ready_issues", json!({}));
        assert_eq!(
            ready["issues"][0]["title"], "low",
            "a leased issue is not ready"
        );
        assert!(matches!(
            call(
                st,
                &f.w2,
                "save_lease",
                json!({"issueId": "ENG-3", "ttlMs": 60000})
            ),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            call(
                st,
                &f.w2,
                "save_lease",
                json!({"issueId": "ENG-3", "release": true})
            ),
            Err(StoreError::Conflict(_))
        ));
        not_allowed(
            call(
                st,
                &f.w2,
                "save_lease",
                json!({"issueId": "ENG-1", "holder": "w1"}),
            ),
            Role::Worker,
        );
        // Renewing keeps the lease's start.
        let renewed = ok(
            st,
            &f.w1,
            "save_lease",
            json!({"issueId": "ENG-3", "ttlMs": 60000}),
        );
        assert_eq!(renewed["lease"]["createdAt"], taken["lease"]["createdAt"]);

        st.advance_clock(60_001);
        let stolen = ok(
            st,
            &f.w2,
            "save_lease",
            json!({"issueId": "ENG-3", "ttlMs": 1000}),
        );
        assert_eq!(stolen["lease"]["holder"], "w2");
        assert!(matches!(
            call(
                st,
                &f.w1,
                "save_lease",
                json!({"issueId": "ENG-3", "release": true})
            ),
            Err(StoreError::Conflict(_))
        ));
        let released = ok(
            st,
            &f.w2,
            "save_lease",
            json!({"issueId": "ENG-3", "release": true}),
        );
        assert_eq!(released["released"], true);
        assert_eq!(released["lease"], Value::Null);
        assert!(st.lease("ENG-3").expect("lease").is_none());
        let nothing = ok(
            st,
            &f.w2,
            "save_lease",
            json!({"issueId": "ENG-3", "release": true}),
        );
        assert_eq!(nothing["released"], false);
        assert!(matches!(
            invoke(
                st,
                &f.w1,
                "save_lease",
                json!({"issueId": "ENG-3", "ttlMs": 10})
            ),
            Err(StoreError::Invalid(_))
        ));
    }

    #[test]
    fn events_evidence_and_checks() {
        let mut f = fx();
        let st = &mut f.store;
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": "t"}),
        );
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": "other"}),
        );
        let b = ok(
            st,
            &f.w1,
            "save_evidence_bundle",
            json!({"issueId": "ENG-1", "summary": "tests pass",
                   "items": [{"kind": "test", "ref": "cargo test -p x", "note": "42 passed"},
                             {"kind": "commit", "ref": "abc123"}]}),
        );
        let bid = s(&b["bundle"]["id"]);
        assert_eq!(b["bundle"]["items"][1]["ref"], "abc123");
        ok(
            st,
            &f.reviewer,
            "post_bundle_check",
            json!({"bundleId": bid, "name": "reran tests", "outcome": "pass"}),
        );
        ok(
            st,
            &f.reviewer,
            "post_bundle_check",
            json!({"bundleId": bid, "name": "screenshot", "outcome": "fail", "detail": "blurry"}),
        );
        let got = ok(st, &f.w2, "get_evidence_bundle", json!({"id": bid}));
        let outcomes: Vec<String> = got["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .map(|c| s(&c["outcome"]))
            .collect();
        assert_eq!(outcomes, ["pass", "fail"]);
        let replaced = ok(
            st,
            &f.w1,
            "save_evidence_bundle",
            json!({"id": bid, "summary": "tests pass, screenshot retaken",
                   "ifUpdatedAt": b["bundle"]["updatedAt"].clone()}),
        );
        assert_eq!(
            replaced["bundle"]["items"].as_array().expect("items").len(),
            2
        );
        assert!(matches!(
            call(
                st,
                &f.w1,
                "post_issue_event",
                json!({"issueId": "ENG-2", "stage": "evidence", "evidenceBundleId": bid})
            ),
            Err(StoreError::Invalid(_))
        ));
        for stage in ["claimed", "started", "evidence", "ready-for-review"] {
            let mut args = json!({"issueId": "ENG-1", "stage": stage});
            if stage == "evidence" {
                args["evidenceBundleId"] = Value::from(bid.clone());
            }
            ok(st, &f.w1, "post_issue_event", args);
        }
        let events = ok(st, &f.w2, "list_issue_events", json!({"issueId": "ENG-1"}));
        let stages: Vec<String> = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| s(&e["stage"]))
            .collect();
        assert_eq!(
            stages,
            ["claimed", "started", "evidence", "ready-for-review"]
        );
        assert_eq!(events["events"][2]["evidenceBundleId"], Value::from(bid));
        let only = ok(
            st,
            &f.w2,
            "list_issue_events",
            json!({"issueId": "ENG-1", "stage": "started"}),
        );
        assert_eq!(only["events"].as_array().expect("events").len(), 1);
    }

    #[test]
    fn an_ask_lands_in_the_inbox_and_the_lead_answers_it() {
        let mut f = fx();
        let st = &mut f.store;
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": "t"}),
        );
        let ask = ok(
            st,
            &f.w1,
            "post_issue_ask",
            json!({"issueId": "ENG-1", "question": "Which port?"}),
        );
        let ask_id = s(&ask["ask"]["id"]);
        not_allowed(invoke(st, &f.w1, "list_inbox", json!({})), Role::Worker);
        let inbox = ok(st, &f.lead, "list_inbox", json!({}));
        let item = &inbox["items"][0];
        assert_eq!(item["id"], Value::from(format!("ask:{ask_id}")));
        assert_eq!(item["kind"], "ask");
        assert_eq!(item["identifier"], "ENG-1");
        assert_eq!(item["state"], "unread");
        let one = ok(
            st,
            &f.lead,
            "get_inbox_item",
            json!({"id": item["id"].clone()}),
        );
        assert_eq!(one["ask"]["question"], "Which port?");
        let read = ok(
            st,
            &f.lead,
            "save_inbox_item",
            json!({"id": item["id"].clone(), "state": "read"}),
        );
        assert_eq!(read["item"]["state"], "read");
        assert!(matches!(
            call(
                st,
                &f.lead,
                "save_inbox_item",
                json!({"id": item["id"].clone(), "state": "snoozed"})
            ),
            Err(StoreError::Invalid(_))
        ));
        let until = st.now() + 60_000;
        ok(
            st,
            &f.lead,
            "save_inbox_item",
            json!({"id": item["id"].clone(), "state": "snoozed", "snoozeUntil": until}),
        );
        assert!(
            ok(st, &f.lead, "list_inbox", json!({}))["items"]
                .as_array()
                .expect("items")
                .is_empty()
        );
        st.advance_clock(60_001);
        assert_eq!(
            ok(st, &f.lead, "list_inbox", json!({}))["items"]
                .as_array()
                .expect("items")
                .len(),
            1
        );

        let answered = ok(
            st,
            &f.lead,
            "post_inbox_answer",
            json!({"id": ask_id, "answer": "7300"}),
        );
        assert_eq!(answered["ask"]["answer"], "7300");
        assert_eq!(answered["ask"]["answeredBy"], "clankie");
        assert_eq!(answered["event"]["stage"], "note");
        assert!(s(&answered["event"]["body"]).contains("7300"));
        assert_eq!(answered["replayed"], false);
        let events = ok(st, &f.w1, "list_issue_events", json!({"issueId": "ENG-1"}));
        assert_eq!(events["events"][0]["stage"], "note");
        assert!(
            ok(st, &f.lead, "list_inbox", json!({}))["items"]
                .as_array()
                .expect("items")
                .is_empty()
        );
        let all = ok(st, &f.lead, "list_inbox", json!({"includeResolved": true}));
        assert_eq!(all["items"][0]["resolved"], true);
        assert!(matches!(
            call(
                st,
                &f.lead,
                "post_inbox_answer",
                json!({"id": format!("ask:{ask_id}"), "answer": "again"})
            ),
            Err(StoreError::Conflict(_))
        ));
    }

    #[test]
    fn a_guided_review_is_drafted_submitted_walked_and_retired() {
        let mut f = fx();
        let st = &mut f.store;
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": "t"}),
        );
        let b = ok(
            st,
            &f.w1,
            "save_evidence_bundle",
            json!({"issueId": "ENG-1", "summary": "s"}),
        );
        let r = ok(
            st,
            &f.w1,
            "save_guided_review",
            json!({"issueId": "ENG-1", "title": "Check login"}),
        );
        let rid = s(&r["review"]["id"]);
        assert_eq!(r["review"]["state"], "draft");
        assert!(matches!(
            call(
                st,
                &f.w1,
                "post_guided_review_submit",
                json!({"reviewId": rid})
            ),
            Err(StoreError::Invalid(_))
        ));
        let step = ok(
            st,
            &f.w1,
            "save_guided_review_step",
            json!({"reviewId": rid, "instruction": "Open the app", "expected": "A login form",
                   "evidenceBundleId": b["bundle"]["id"].clone()}),
        );
        let sid = s(&step["step"]["id"]);
        assert_eq!(step["step"]["position"], 1);
        ok(
            st,
            &f.w1,
            "save_guided_review_step",
            json!({"reviewId": rid, "instruction": "Sign in"}),
        );
        let edited = ok(
            st,
            &f.w1,
            "save_guided_review_step",
            json!({"reviewId": rid, "stepId": sid, "instruction": "Open the app on the phone"}),
        );
        assert_eq!(edited["step"]["expected"], "A login form");
        ok(
            st,
            &f.w1,
            "save_guided_review",
            json!({"issueId": "ENG-1", "id": rid, "title": "Check login", "summary": "two steps"}),
        );
        let submitted = ok(
            st,
            &f.w1,
            "post_guided_review_submit",
            json!({"reviewId": rid}),
        );
        assert_eq!(submitted["review"]["state"], "ready");
        assert!(matches!(
            call(
                st,
                &f.w1,
                "post_guided_review_submit",
                json!({"reviewId": rid})
            ),
            Err(StoreError::Conflict(_))
        ));
        let inbox = ok(st, &f.lead, "list_inbox", json!({}));
        assert_eq!(
            inbox["items"][0]["id"],
            Value::from(format!("review:{rid}"))
        );
        let target = ok(
            st,
            &f.lead,
            "get_inbox_item",
            json!({"id": format!("review:{rid}")}),
        );
        assert_eq!(target["review"]["title"], "Check login");

        let res = ok(
            st,
            &f.reviewer,
            "post_guided_review_step_result",
            json!({"reviewId": rid, "stepId": sid, "outcome": "pass", "note": "fine"}),
        );
        assert_eq!(res["step"]["outcome"], "pass");
        assert_eq!(res["step"]["resultBy"], "rev");
        ok(
            st,
            &f.reviewer,
            "post_guided_review_comment",
            json!({"reviewId": rid, "body": "step 2 next"}),
        );
        let got = ok(st, &f.w2, "get_guided_review", json!({"id": rid}));
        assert_eq!(got["review"]["summary"], "two steps");
        assert_eq!(got["steps"].as_array().expect("steps").len(), 2);
        let steps = ok(
            st,
            &f.w2,
            "list_guided_review_steps",
            json!({"reviewId": rid}),
        );
        assert_eq!(steps["steps"][0]["outcome"], "pass");
        assert_eq!(steps["steps"][1]["outcome"], Value::Null);
        let comments = ok(
            st,
            &f.w2,
            "list_guided_review_comments",
            json!({"reviewId": rid}),
        );
        assert_eq!(comments["comments"][0]["author"], "rev");
        let listed = ok(
            st,
            &f.w2,
            "list_guided_reviews",
            json!({"issueId": "ENG-1", "state": "ready"}),
        );
        assert_eq!(listed["reviews"].as_array().expect("reviews").len(), 1);

        not_allowed(
            invoke(
                st,
                &f.w1,
                "post_retire_guided_review",
                json!({"reviewId": rid, "reason": "x"}),
            ),
            Role::Worker,
        );
        let retired = ok(
            st,
            &f.lead,
            "post_retire_guided_review",
            json!({"reviewId": rid, "reason": "superseded"}),
        );
        assert_eq!(retired["review"]["state"], "retired");
        assert_eq!(retired["review"]["retiredReason"], "superseded");
        assert!(matches!(
            call(
                st,
                &f.w1,
                "save_guided_review_step",
                json!({"reviewId": rid, "instruction": "late"})
            ),
            Err(StoreError::Conflict(_))
        ));
        assert!(
            ok(st, &f.lead, "list_inbox", json!({}))["items"]
                .as_array()
                .expect("items")
                .is_empty()
        );
        let events = ok(
            st,
            &f.w2,
            "list_guided_review_events",
            json!({"reviewId": rid}),
        );
        let kinds: Vec<String> = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| s(&e["kind"]))
            .collect();
        assert_eq!(
            kinds,
            [
                "created",
                "step-added",
                "step-added",
                "step-updated",
                "updated",
                "submitted",
                "step-result",
                "comment",
                "retired"
            ]
        );
    }

    #[test]
    fn runs_and_run_control() {
        let mut f = fx();
        let st = &mut f.store;
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": "t"}),
        );
        let run = ok(
            st,
            &f.w1,
            "save_run",
            json!({"issueId": "ENG-1", "summary": "building"}),
        );
        let id = s(&run["run"]["id"]);
        assert_eq!(run["run"]["status"], "queued");
        ok(
            st,
            &f.w1,
            "save_run",
            json!({"id": id, "status": "running"}),
        );
        not_allowed(
            invoke(
                st,
                &f.w1,
                "post_run_control",
                json!({"runId": id, "action": "cancel"}),
            ),
            Role::Worker,
        );
        let paused = ok(
            st,
            &f.lead,
            "post_run_control",
            json!({"runId": id, "action": "pause"}),
        );
        assert_eq!(paused["run"]["paused"], true);
        let resumed = ok(
            st,
            &f.lead,
            "post_run_control",
            json!({"runId": id, "action": "resume"}),
        );
        assert_eq!(resumed["run"]["paused"], false);
        let canceled = ok(
            st,
            &f.lead,
            "post_run_control",
            json!({"runId": id, "action": "cancel"}),
        );
        assert_eq!(canceled["run"]["status"], "canceled");
        assert!(matches!(
            call(
                st,
                &f.w1,
                "save_run",
                json!({"id": id, "status": "running"})
            ),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            call(
                st,
                &f.lead,
                "post_run_control",
                json!({"runId": id, "action": "resume"})
            ),
            Err(StoreError::Conflict(_))
        ));
        let summary = ok(
            st,
            &f.w1,
            "save_run",
            json!({"id": id, "summary": "stopped by the lead"}),
        );
        assert_eq!(summary["run"]["status"], "canceled");
        ok(
            st,
            &f.w2,
            "save_run",
            json!({"issueId": "ENG-1", "status": "succeeded"}),
        );
        let runs = ok(st, &f.w2, "list_runs", json!({"issueId": "ENG-1"}));
        assert_eq!(runs["runs"].as_array().expect("runs").len(), 2);
        let ok_runs = ok(st, &f.w2, "list_runs", json!({"status": "succeeded"}));
        assert_eq!(ok_runs["runs"][0]["createdBy"], "w2");
    }

    #[test]
    fn list_changes_pages_by_cursor() {
        let mut f = fx();
        let st = &mut f.store;
        for i in 0..5 {
            ok(
                st,
                &f.w1,
                "save_issue",
                json!({"team": "ENG", "title": format!("i{i}")}),
            );
        }
        let end = st.cursor().expect("cursor");
        let mut cursor = 0;
        let mut seen = Vec::new();
        loop {
            let page = ok(
                st,
                &f.w2,
                "list_changes",
                json!({"cursor": cursor, "limit": 2, "waitMs": 0}),
            );
            let changes = page["changes"].as_array().expect("changes").clone();
            let next = page["cursor"].as_i64().expect("cursor");
            if changes.is_empty() {
                assert_eq!(next, cursor, "an empty page echoes the cursor");
                break;
            }
            assert!(changes.len() <= 2);
            for c in &changes {
                seen.push(c["seq"].as_i64().expect("seq"));
            }
            assert_eq!(next, *seen.last().expect("seq"));
            cursor = next;
        }
        assert_eq!(cursor, end);
        assert_eq!(seen.len() as i64, end, "every change once, in order");
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        let all = ok(st, &f.w2, "list_changes", json!({}));
        assert_eq!(all["changes"][0]["entity"], "team");
        assert!(matches!(
            invoke(st, &f.w2, "list_changes", json!({"limit": 501})),
            Err(StoreError::Invalid(_))
        ));
    }

    #[test]
    fn a_cut_over_team_keeps_linear_keys_and_its_items_are_owned() {
        let mut f = fx();
        let st = &mut f.store;
        let team = st.cut_over_team("VUH", "Vuh", "import").expect("cut over");
        assert!(team.cut_over);
        let imported = st
            .import_issue(
                "VUH",
                "VUH-12",
                "5f1c-linear-uuid",
                "Old issue",
                "from Linear",
                "In Progress",
                "import",
            )
            .expect("import");
        assert_eq!(imported.identifier, "VUH-12");
        assert_eq!(imported.linear_id.as_deref(), Some("5f1c-linear-uuid"));
        assert!(matches!(
            st.import_issue("VUH", "VUH-12", "other", "again", "", "Todo", "import"),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            st.import_issue("ENG", "ENG-7", "x", "t", "", "Todo", "import"),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            st.import_issue("VUH", "ENG-7", "y", "t", "", "Todo", "import"),
            Err(StoreError::Invalid(_))
        ));
        let local = ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "VUH", "title": "New here"}),
        );
        assert_eq!(local["issue"]["identifier"], "LOCAL-VUH-1");
        let eng = ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": "not imported"}),
        );
        assert_eq!(eng["issue"]["identifier"], "ENG-1");
        ok(
            st,
            &f.lead,
            "save_project",
            json!({"name": "Work Sync", "team": "VUH"}),
        );
        ok(
            st,
            &f.lead,
            "save_project",
            json!({"name": "Elsewhere", "team": "ENG"}),
        );

        let local_id = s(&local["issue"]["id"]);
        for r in [
            "VUH-12",
            "vuh-12",
            "5f1c-linear-uuid",
            "LOCAL-VUH-1",
            local_id.as_str(),
            "VUH",
            "Work Sync",
            "work sync",
        ] {
            assert!(st.owns_item(r).expect("owns"), "{r} is ours");
        }
        for r in ["VUH-13", "ENG-1", "ENG", "Elsewhere", "NOPE-1", ""] {
            assert!(!st.owns_item(r).expect("owns"), "{r} is not ours");
        }
        let by_linear = ok(st, &f.w1, "get_issue", json!({"id": "5f1c-linear-uuid"}));
        assert_eq!(by_linear["issue"]["identifier"], "VUH-12");
        let t = ok(st, &f.w1, "get_team", json!({"query": "vuh"}));
        assert_eq!(t["team"]["cutOver"], true);
        // Untouched imports are not drift; a completed import is not unverified.
        st.import_issue("VUH", "VUH-3", "done-uuid", "Shipped", "", "Done", "import")
            .expect("import done");
        let drift = ok(st, &f.lead, "list_drift", json!({"team": "VUH"}));
        assert!(drift["drift"].as_array().expect("drift").is_empty());
    }

    #[test]
    fn projects_labels_and_planning_reads() {
        let mut f = fx();
        let st = &mut f.store;
        not_allowed(
            invoke(st, &f.w1, "save_project", json!({"name": "P"})),
            Role::Worker,
        );
        let p = ok(
            st,
            &f.lead,
            "save_project",
            json!({"name": "Work Sync", "team": "ENG", "state": "started", "targetDate": "2026-11-30"}),
        );
        let pid = s(&p["project"]["id"]);
        assert!(matches!(
            call(st, &f.lead, "save_project", json!({"name": "work sync"})),
            Err(StoreError::Conflict(_))
        ));
        let p2 = ok(
            st,
            &f.lead,
            "save_project",
            json!({"id": "Work Sync", "lead": "james", "ifUpdatedAt": p["project"]["updatedAt"].clone()}),
        );
        assert_eq!(p2["project"]["lead"], "james");
        assert_eq!(
            ok(st, &f.w1, "get_project", json!({"query": "WORK SYNC"}))["project"]["id"],
            Value::from(pid.clone())
        );
        let listed = ok(
            st,
            &f.w1,
            "list_projects",
            json!({"state": "started", "team": "ENG"}),
        );
        assert_eq!(listed["projects"].as_array().expect("projects").len(), 1);
        let statuses = ok(st, &f.w1, "list_project_statuses", json!({}));
        assert_eq!(statuses["statuses"].as_array().expect("statuses").len(), 6);
        let issue_statuses = ok(st, &f.w1, "list_issue_statuses", json!({"team": "ENG"}));
        assert_eq!(issue_statuses["statuses"][3]["name"], "In Review");

        let u = ok(
            st,
            &f.w1,
            "save_status_update",
            json!({"projectId": "Work Sync", "health": "atRisk", "body": "slipping"}),
        );
        let uid = s(&u["statusUpdate"]["id"]);
        not_allowed(
            call(
                st,
                &f.w2,
                "save_status_update",
                json!({"id": uid, "body": "not mine"}),
            ),
            Role::Worker,
        );
        ok(
            st,
            &f.w1,
            "save_status_update",
            json!({"id": uid, "health": "onTrack"}),
        );
        let updates = ok(st, &f.w2, "get_status_updates", json!({"projectId": pid}));
        assert_eq!(updates["statusUpdates"][0]["health"], "onTrack");

        ok(
            st,
            &f.w1,
            "create_issue_label",
            json!({"name": "bug", "color": "#ff0000"}),
        );
        ok(
            st,
            &f.w1,
            "save_issue_label",
            json!({"name": "bug", "teamId": "ENG"}),
        );
        assert!(matches!(
            call(st, &f.w1, "create_issue_label", json!({"name": "BUG"})),
            Err(StoreError::Conflict(_))
        ));
        let labels = ok(st, &f.w1, "list_issue_labels", json!({"team": "ENG"}));
        assert_eq!(labels["labels"].as_array().expect("labels").len(), 2);

        let now = st.now();
        let c1 = st
            .create_cycle("clankie", "ENG", "", now - 1000, now + 1000)
            .expect("cycle");
        let c2 = st
            .create_cycle("clankie", "ENG", "Next", now + 1000, now + 2000)
            .expect("cycle");
        assert_eq!((c1.number, c1.name.as_str()), (1, "Cycle 1"));
        let current = ok(
            st,
            &f.w1,
            "list_cycles",
            json!({"teamId": "ENG", "type": "current"}),
        );
        assert_eq!(current["cycles"][0]["id"], Value::from(c1.id.clone()));
        let next = ok(st, &f.w1, "list_cycles", json!({"type": "next"}));
        assert_eq!(next["cycles"][0]["id"], Value::from(c2.id.clone()));
        assert_eq!(
            ok(st, &f.w1, "list_cycles", json!({}))["cycles"]
                .as_array()
                .expect("cycles")
                .len(),
            2
        );
        assert_eq!(
            ok(st, &f.w1, "get_cycle", json!({"id": c2.id}))["cycle"]["number"],
            2
        );
        let m = st
            .create_milestone("clankie", "Work Sync", "Beta", "", Some("2026-11-01"))
            .expect("milestone");
        assert_eq!(
            ok(
                st,
                &f.w1,
                "list_milestones",
                json!({"project": "Work Sync"})
            )["milestones"][0]["name"],
            "Beta"
        );
        assert_eq!(
            ok(st, &f.w1, "get_milestone", json!({"id": m.id}))["milestone"]["targetDate"],
            "2026-11-01"
        );

        let planned = ok(
            st,
            &f.lead,
            "save_issue",
            json!({"team": "ENG", "title": "planned", "project": "Work Sync", "milestone": "beta", "cycle": "1"}),
        );
        assert_eq!(planned["issue"]["projectId"], Value::from(pid.clone()));
        assert_eq!(planned["issue"]["milestone"], Value::from(m.id.clone()));
        assert_eq!(planned["issue"]["cycle"], Value::from(c1.id.clone()));
        assert_eq!(
            ok(
                st,
                &f.w1,
                "list_issues",
                json!({"project": "work sync", "cycle": "1"})
            )["issues"]
                .as_array()
                .expect("issues")
                .len(),
            1
        );
        assert!(matches!(
            call(
                st,
                &f.lead,
                "save_issue",
                json!({"id": "ENG-1", "milestone": "nope"})
            ),
            Err(StoreError::NotFound(_))
        ));

        let d = st
            .create_document(
                "clankie",
                "Runbook",
                "# Steps",
                Some("Work Sync"),
                Some("ENG-1"),
            )
            .expect("doc");
        let docs = ok(st, &f.w1, "list_documents", json!({"issueId": "ENG-1"}));
        assert_eq!(
            docs["documents"][0]["content"], "",
            "lists leave content out"
        );
        assert_eq!(
            ok(st, &f.w1, "get_document", json!({"id": d.id}))["document"]["content"],
            "# Steps"
        );
        st.create_release("clankie", "v0.1.0", "first", &["ENG-1"])
            .expect("release");
        let rel = ok(st, &f.w1, "get_release", json!({"id": "v0.1.0"}));
        assert_eq!(rel["release"]["issueIds"][0], planned["issue"]["id"]);
        assert_eq!(
            ok(st, &f.w1, "list_releases", json!({}))["releases"]
                .as_array()
                .expect("releases")
                .len(),
            1
        );
        st.create_initiative("clankie", "Cut over", "", "Active", None)
            .expect("initiative");
        assert_eq!(
            ok(st, &f.w1, "list_initiatives", json!({"status": "active"}))["initiatives"][0]["name"],
            "Cut over"
        );
    }

    #[test]
    fn users_audit_and_drift() {
        let mut f = fx();
        let st = &mut f.store;
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": "t", "assignee": "w9", "repo": "kh2"}),
        );
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"id": "ENG-1", "state": "In Progress"}),
        );
        let me = ok(st, &f.w2, "get_user", json!({"query": "me"}));
        assert_eq!(me["user"]["name"], "w2");
        assert_eq!(me["user"]["isMe"], true);
        assert_eq!(me["user"]["writes"], 0);
        let w1 = ok(st, &f.w2, "get_user", json!({"query": "w1"}));
        assert_eq!(w1["user"]["writes"], 2);
        let users = ok(st, &f.w2, "list_users", json!({}));
        let names: Vec<String> = users["users"]
            .as_array()
            .expect("users")
            .iter()
            .map(|u| s(&u["name"]))
            .collect();
        assert_eq!(names, ["clankie", "w1", "w2", "w9"]);
        assert!(matches!(
            call(st, &f.w2, "get_user", json!({"query": "stranger"})),
            Err(StoreError::NotFound(_))
        ));
        let audit = ok(
            st,
            &f.lead,
            "list_audit_events",
            json!({"actor": "w1", "limit": 1}),
        );
        assert_eq!(audit["events"][0]["tool"], "save_issue");
        assert_eq!(audit["events"][0]["role"], "worker");
        assert_eq!(audit["events"][0]["entity"], "issue");
        let older = ok(
            st,
            &f.lead,
            "list_audit_events",
            json!({"actor": "w1", "cursor": audit["cursor"].clone()}),
        );
        assert_eq!(older["events"].as_array().expect("events").len(), 1);
        let all = ok(st, &f.lead, "list_audit_events", json!({}));
        assert_eq!(
            all["events"]
                .as_array()
                .expect("events")
                .last()
                .expect("first")["tool"],
            "create_team"
        );
        assert_eq!(st.count_writes("w1").expect("writes"), 2);

        assert!(
            ok(st, &f.lead, "list_drift", json!({}))["drift"]
                .as_array()
                .expect("drift")
                .is_empty()
        );
        st.advance_clock(crate::store::IDLE_MS + 1);
        let drift = ok(st, &f.lead, "list_drift", json!({}));
        assert_eq!(drift["drift"][0]["reason"], "started-idle");
        assert_eq!(drift["drift"][0]["issue"]["identifier"], "ENG-1");
        ok(st, &f.w1, "save_lease", json!({"issueId": "ENG-1"}));
        assert!(
            ok(st, &f.lead, "list_drift", json!({}))["drift"]
                .as_array()
                .expect("drift")
                .is_empty()
        );
        ok(
            st,
            &f.lead,
            "save_issue_status",
            json!({"id": "ENG-1", "state": "Canceled"}),
        );
        let drift = ok(st, &f.lead, "list_drift", json!({}));
        assert_eq!(drift["drift"][0]["reason"], "leased-but-closed");
    }
}
