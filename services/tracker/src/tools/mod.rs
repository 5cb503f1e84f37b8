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
mod tests;
