//! The tracker's SQLite store.
//!
//! - One database file, `tracker.db`, in WAL mode with `synchronous=FULL`:
//!   a committed write survives `kill -9` and power loss alike.
//! - Migrations are numbered by `PRAGMA user_version`; a database newer than
//!   this build is refused rather than guessed at.
//! - Every write runs in one immediate transaction that also appends to the
//!   change log and the audit log and, when the caller gave an idempotency
//!   key, records the result under that key. A repeated key returns the
//!   recorded result and writes nothing.
//! - `ifUpdatedAt` makes an update conditional on the version the caller
//!   read; `updatedAt` strictly increases on every write of a row.
//! - Calls made as a [`Caller`] carry a tracker role; the store refuses the
//!   limited roles' forbidden writes itself ([`StoreError::NotAllowed`]),
//!   behind the host's profile check. Calls made with a bare actor name
//!   (seeding, imports, the original API) are trusted.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;

pub use crate::vocabulary::{Role, STATES, state_type};

mod identity;
mod plan;
mod review;
mod work;

pub use plan::{
    Cycle, Document, Initiative, Label, Milestone, Project, ProjectQuery, Release, SaveLabel,
    SaveProject, SaveStatusUpdate, StatusUpdate,
};
pub use review::{
    AskAnswer, GuidedReview, GuidedReviewComment, GuidedReviewEvent, GuidedReviewStep, InboxItem,
    InboxTarget, PostInboxAnswer, PostReviewComment, PostStepResult, RetireReview, ReviewRef,
    SaveGuidedReview, SaveGuidedReviewStep, SaveInboxItem,
};
pub use work::{
    Ask, BundleCheck, Drift, DriftIssue, EvidenceBundle, EvidenceItem, IDLE_MS, IssueEvent, Lease,
    LeaseResult, PostBundleCheck, PostIssueAsk, PostIssueEvent, Run, RunControl,
    SaveEvidenceBundle, SaveLease, SaveRun,
};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 2;

/// Migration 1 must never change: databases exist at every version.
const MIGRATIONS: &[&str] = &[
    // 1: teams, issues, comments, the change log, write receipts.
    "CREATE TABLE teams (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        next_number INTEGER NOT NULL DEFAULT 1,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE issues (
        id TEXT PRIMARY KEY,
        team_id TEXT NOT NULL REFERENCES teams(id),
        number INTEGER NOT NULL,
        identifier TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL,
        state_type TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        assignee TEXT,
        labels TEXT NOT NULL DEFAULT '[]',
        parent_id TEXT,
        cycle TEXT,
        milestone TEXT,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX issues_team ON issues(team_id, number);
    CREATE TABLE comments (
        id TEXT PRIMARY KEY,
        issue_id TEXT NOT NULL REFERENCES issues(id),
        body TEXT NOT NULL,
        author TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX comments_issue ON comments(issue_id, created_at);
    CREATE TABLE changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        entity TEXT NOT NULL,
        entity_id TEXT NOT NULL,
        action TEXT NOT NULL,
        actor TEXT NOT NULL,
        at INTEGER NOT NULL
    );
    CREATE TABLE write_receipts (
        key TEXT NOT NULL,
        actor TEXT NOT NULL,
        tool TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (actor, key)
    );",
    // 2: cut-over teams and imported issues, projects and their updates,
    // labels, the audit log, the work loop (events, evidence, asks, leases,
    // runs), planning entities, guided reviews and the inbox.
    "ALTER TABLE teams ADD COLUMN cut_over INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE issues ADD COLUMN linear_id TEXT;
    ALTER TABLE issues ADD COLUMN project_id TEXT;
    CREATE UNIQUE INDEX issues_linear_id ON issues(linear_id) WHERE linear_id IS NOT NULL;
    CREATE INDEX issues_state ON issues(state_type, priority, created_at);
    CREATE INDEX issues_parent ON issues(parent_id);
    CREATE INDEX issues_updated ON issues(updated_at, id);
    ALTER TABLE comments ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
    UPDATE comments SET updated_at = created_at;
    CREATE TABLE audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        actor TEXT NOT NULL,
        role TEXT,
        tool TEXT NOT NULL,
        entity TEXT NOT NULL,
        entity_id TEXT NOT NULL,
        at INTEGER NOT NULL
    );
    CREATE INDEX audit_actor ON audit(actor, seq);
    CREATE TABLE projects (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        team_id TEXT REFERENCES teams(id),
        state TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        lead TEXT,
        target_date TEXT,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX projects_name ON projects(lower(name));
    CREATE TABLE status_updates (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES projects(id),
        health TEXT NOT NULL,
        body TEXT NOT NULL,
        author TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX status_updates_project ON status_updates(project_id, created_at);
    CREATE TABLE labels (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        color TEXT,
        description TEXT NOT NULL DEFAULT '',
        team_id TEXT REFERENCES teams(id),
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX labels_name ON labels(lower(name), COALESCE(team_id, ''));
    CREATE TABLE evidence_bundles (
        id TEXT PRIMARY KEY,
        issue_id TEXT NOT NULL REFERENCES issues(id),
        summary TEXT NOT NULL,
        items TEXT NOT NULL DEFAULT '[]',
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX evidence_bundles_issue ON evidence_bundles(issue_id);
    CREATE TABLE bundle_checks (
        id TEXT PRIMARY KEY,
        bundle_id TEXT NOT NULL REFERENCES evidence_bundles(id),
        name TEXT NOT NULL,
        outcome TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        actor TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX bundle_checks_bundle ON bundle_checks(bundle_id, created_at);
    CREATE TABLE issue_events (
        id TEXT PRIMARY KEY,
        issue_id TEXT NOT NULL REFERENCES issues(id),
        stage TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        evidence_bundle_id TEXT REFERENCES evidence_bundles(id),
        actor TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX issue_events_issue ON issue_events(issue_id, created_at);
    CREATE TABLE asks (
        id TEXT PRIMARY KEY,
        issue_id TEXT NOT NULL REFERENCES issues(id),
        question TEXT NOT NULL,
        asked_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        answer TEXT,
        answered_by TEXT,
        answered_at INTEGER
    );
    CREATE TABLE leases (
        issue_id TEXT PRIMARY KEY REFERENCES issues(id),
        holder TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        issue_id TEXT NOT NULL REFERENCES issues(id),
        status TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        paused INTEGER NOT NULL DEFAULT 0,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX runs_issue ON runs(issue_id, created_at);
    CREATE TABLE cycles (
        id TEXT PRIMARY KEY,
        team_id TEXT NOT NULL REFERENCES teams(id),
        number INTEGER NOT NULL,
        name TEXT NOT NULL,
        starts_at INTEGER NOT NULL,
        ends_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        UNIQUE (team_id, number)
    );
    CREATE TABLE milestones (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES projects(id),
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        target_date TEXT,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE documents (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        content TEXT NOT NULL DEFAULT '',
        project_id TEXT REFERENCES projects(id),
        issue_id TEXT REFERENCES issues(id),
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE releases (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        notes TEXT NOT NULL DEFAULT '',
        issue_ids TEXT NOT NULL DEFAULT '[]',
        released_at INTEGER NOT NULL,
        created_by TEXT NOT NULL
    );
    CREATE TABLE initiatives (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL,
        target_date TEXT,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE guided_reviews (
        id TEXT PRIMARY KEY,
        issue_id TEXT NOT NULL REFERENCES issues(id),
        title TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL,
        retired_reason TEXT,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE guided_review_steps (
        id TEXT PRIMARY KEY,
        review_id TEXT NOT NULL REFERENCES guided_reviews(id),
        position INTEGER NOT NULL,
        instruction TEXT NOT NULL,
        expected TEXT NOT NULL DEFAULT '',
        evidence_bundle_id TEXT REFERENCES evidence_bundles(id),
        outcome TEXT,
        note TEXT,
        result_by TEXT,
        result_at INTEGER,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE INDEX guided_review_steps_review ON guided_review_steps(review_id, position);
    CREATE TABLE guided_review_comments (
        id TEXT PRIMARY KEY,
        review_id TEXT NOT NULL REFERENCES guided_reviews(id),
        body TEXT NOT NULL,
        author TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE guided_review_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        review_id TEXT NOT NULL REFERENCES guided_reviews(id),
        kind TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        actor TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE inbox_items (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        snooze_until INTEGER,
        updated_by TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );",
];

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid: {0}")]
    Invalid(String),
    /// The caller's role may not do this (the store's own check, behind the
    /// host's profile check). `what` is a sentence naming the role.
    #[error("not allowed: {what}")]
    NotAllowed { role: Role, what: String },
    #[error("the tracker database is newer (schema {0}) than this build ({SCHEMA_VERSION})")]
    TooNew(i64),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

/// Who is calling, as the host resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub actor: String,
    pub role: Role,
}

impl Caller {
    pub fn new(actor: impl Into<String>, role: Role) -> Caller {
        Caller {
            actor: actor.into(),
            role,
        }
    }

    fn who(&self) -> Who<'_> {
        Who {
            actor: &self.actor,
            role: Some(self.role),
        }
    }
}

/// The writer of one transaction: a role for tool calls, none for trusted
/// store calls.
#[derive(Debug, Clone, Copy)]
struct Who<'a> {
    actor: &'a str,
    role: Option<Role>,
}

impl Who<'_> {
    fn limited(&self) -> Option<Role> {
        self.role.filter(|r| r.limited())
    }

    /// Refuses a limited role: `what` finishes "... is not available to the
    /// worker role".
    fn require_lead(&self, what: &str) -> Result<(), StoreError> {
        match self.limited() {
            Some(role) => Err(StoreError::NotAllowed {
                role,
                what: format!("{what} is not available to the {role} role"),
            }),
            None => Ok(()),
        }
    }

    /// Refuses a limited role acting on a record someone else owns.
    fn own_only(&self, owner: &str, what: &str) -> Result<(), StoreError> {
        if owner == self.actor {
            Ok(())
        } else {
            self.require_lead(what)
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Team {
    pub id: String,
    pub key: String,
    pub name: String,
    /// Imported from Linear: its issues keep their Linear identifiers, and
    /// issues created here are `LOCAL-TEAM-n`.
    #[serde(default)]
    pub cut_over: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    pub id: String,
    pub identifier: String,
    pub team_id: String,
    pub title: String,
    pub description: String,
    pub state: String,
    pub state_type: String,
    pub priority: i64,
    pub assignee: Option<String>,
    pub labels: Vec<String>,
    pub parent_id: Option<String>,
    pub cycle: Option<String>,
    pub milestone: Option<String>,
    #[serde(default)]
    pub project_id: Option<String>,
    /// The Linear UUID of an imported issue.
    #[serde(default)]
    pub linear_id: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub id: String,
    pub issue_id: String,
    pub body: String,
    pub author: String,
    pub created_at: i64,
    #[serde(default)]
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    pub seq: i64,
    pub entity: String,
    pub entity_id: String,
    pub action: String,
    pub actor: String,
    pub at: i64,
}

/// One row of the audit log: one per successful write.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub seq: i64,
    pub actor: String,
    /// The caller's role for tool calls; none for trusted store calls.
    pub role: Option<String>,
    pub tool: String,
    pub entity: String,
    pub entity_id: String,
    pub at: i64,
}

/// A recorded write result under an actor's idempotency key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub idempotency_key: String,
    pub tool: String,
    pub result: Value,
    pub created_at: i64,
}

/// An actor this tracker has seen.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: String,
    pub name: String,
    pub is_me: bool,
    /// Audited writes by this actor.
    pub writes: i64,
    pub last_seen_at: Option<i64>,
}

/// One page of a keyset-paginated list.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass back to read the next page; none on the last page.
    pub cursor: Option<String>,
    pub has_more: bool,
}

/// `save_issue` input: create without `id`, update with it. Absent fields
/// are left as they are; an empty string clears an optional field.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveIssue {
    pub id: Option<String>,
    pub team: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub state: Option<String>,
    pub priority: Option<i64>,
    pub assignee: Option<String>,
    pub labels: Option<Vec<String>>,
    pub parent_id: Option<String>,
    pub cycle: Option<String>,
    pub milestone: Option<String>,
    pub project: Option<String>,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

/// `save_issue_status` input (lead only).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveIssueStatus {
    pub id: String,
    pub state: String,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

/// `save_comment` input: add without `id`, edit with it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveComment {
    pub id: Option<String>,
    pub issue_id: Option<String>,
    pub body: String,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

/// Filters of `list_issues` and `search_issues`.
#[derive(Debug, Clone, Default)]
pub struct IssueQuery {
    pub team: Option<String>,
    /// A state name or a state type.
    pub state: Option<String>,
    pub assignee: Option<String>,
    pub label: Option<String>,
    pub project: Option<String>,
    pub cycle: Option<String>,
    pub parent: Option<String>,
    pub text: Option<String>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
    /// Newest created first instead of most recently updated first.
    pub order_by_created: bool,
}

/// What a write returns: the result, and whether it was recorded earlier
/// under the same idempotency key (nothing was written this time).
#[derive(Debug, Clone, PartialEq)]
pub struct Written<T> {
    pub value: T,
    pub replayed: bool,
}

pub struct Store {
    conn: Connection,
    clock_skew_ms: i64,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A later `updatedAt`: strictly increasing, even within one millisecond.
fn bump(now: i64, previous: i64) -> i64 {
    now.max(previous + 1)
}

/// Refuses a stale `ifUpdatedAt`.
fn check_fresh(expected: Option<i64>, actual: i64, what: &str) -> Result<(), StoreError> {
    match expected {
        Some(e) if e != actual => Err(StoreError::Conflict(format!(
            "{what} was updated at {actual}, not {e}; read it again"
        ))),
        _ => Ok(()),
    }
}

/// A non-blank string, or `Invalid` naming the field.
fn required<'a>(value: Option<&'a str>, what: &str) -> Result<&'a str, StoreError> {
    value
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| StoreError::Invalid(format!("{what} is required")))
}

/// An optional string with "" meaning none.
fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

fn one_of(value: &str, allowed: &[&str], what: &str) -> Result<(), StoreError> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "{what} must be one of {}, not {value}",
            allowed.join(", ")
        )))
    }
}

fn page_limit(limit: Option<i64>) -> i64 {
    limit.unwrap_or(50).clamp(1, crate::vocabulary::MAX_LIMIT)
}

fn json_list(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_default()
}

fn all<T, P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    p: P,
    f: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map(p, f)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn one<T, P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    p: P,
    f: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>, StoreError> {
    Ok(conn.query_row(sql, p, f).optional()?)
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation)
}

fn issue_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Issue> {
    let labels: String = r.get("labels")?;
    Ok(Issue {
        id: r.get("id")?,
        identifier: r.get("identifier")?,
        team_id: r.get("team_id")?,
        title: r.get("title")?,
        description: r.get("description")?,
        state: r.get("state")?,
        state_type: r.get("state_type")?,
        priority: r.get("priority")?,
        assignee: r.get("assignee")?,
        labels: json_list(&labels),
        parent_id: r.get("parent_id")?,
        cycle: r.get("cycle")?,
        milestone: r.get("milestone")?,
        project_id: r.get("project_id")?,
        linear_id: r.get("linear_id")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn team_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Team> {
    Ok(Team {
        id: r.get("id")?,
        key: r.get("key")?,
        name: r.get("name")?,
        cut_over: r.get("cut_over")?,
    })
}

fn comment_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Comment> {
    Ok(Comment {
        id: r.get("id")?,
        issue_id: r.get("issue_id")?,
        body: r.get("body")?,
        author: r.get("author")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn change_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Change> {
    Ok(Change {
        seq: r.get("seq")?,
        entity: r.get("entity")?,
        entity_id: r.get("entity_id")?,
        action: r.get("action")?,
        actor: r.get("actor")?,
        at: r.get("at")?,
    })
}

fn audit_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AuditEvent> {
    Ok(AuditEvent {
        seq: r.get("seq")?,
        actor: r.get("actor")?,
        role: r.get("role")?,
        tool: r.get("tool")?,
        entity: r.get("entity")?,
        entity_id: r.get("entity_id")?,
        at: r.get("at")?,
    })
}

/// An issue by id, identifier (any case) or Linear UUID.
fn find_issue(conn: &Connection, reference: &str) -> Result<Issue, StoreError> {
    one(
        conn,
        "SELECT * FROM issues WHERE id = ?1 OR identifier = upper(?1) OR linear_id = ?1 LIMIT 1",
        params![reference],
        issue_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("issue {reference}")))
}

/// A team by key (any case), id or name (any case).
fn find_team(conn: &Connection, reference: &str) -> Result<Team, StoreError> {
    one(
        conn,
        "SELECT * FROM teams WHERE key = upper(?1) OR id = ?1 OR lower(name) = lower(?1)
         ORDER BY key = upper(?1) DESC, id = ?1 DESC LIMIT 1",
        params![reference],
        team_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("team {reference}")))
}

fn valid_team_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty()
        || key.len() > 16
        || !key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(StoreError::Invalid(
            "a team key is 1-16 uppercase letters, digits or '-'".into(),
        ));
    }
    if key.starts_with("LOCAL-") {
        // LOCAL-TEAM-n belongs to cut-over teams' local issues.
        return Err(StoreError::Invalid(
            "a team key cannot start with LOCAL- (cut-over teams' local issues use it)".into(),
        ));
    }
    Ok(())
}

/// The open transaction of one write.
struct Tx<'c> {
    tx: rusqlite::Transaction<'c>,
    actor: String,
    now: i64,
    /// The first entity the write touched, for the audit row.
    first: Option<(String, String)>,
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.tx
    }
}

impl Tx<'_> {
    /// Appends to the change log.
    fn change(&mut self, entity: &str, id: &str, action: &str) -> Result<(), StoreError> {
        log_change(&self.tx, entity, id, action, &self.actor, self.now)?;
        if self.first.is_none() {
            self.first = Some((entity.to_string(), id.to_string()));
        }
        Ok(())
    }

    /// Names what the write is about without logging a change (a write
    /// that turned out to change nothing is still audited).
    fn touch(&mut self, entity: &str, id: &str) {
        if self.first.is_none() {
            self.first = Some((entity.to_string(), id.to_string()));
        }
    }
}

/// The tool a receipt is recorded under: aliases share their tool's keys.
fn receipt_tool(tool: &str) -> &str {
    match tool {
        "create_comment" => "save_comment",
        "create_issue_label" => "save_issue_label",
        t => t,
    }
}

fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > 200 {
        return Err(StoreError::Invalid(
            "an idempotency key is 1 to 200 bytes".into(),
        ));
    }
    Ok(())
}

impl Store {
    /// Opens (creating) `dir/tracker.db` and brings its schema up to date.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        clankie_runtime::state::private_dir(dir)
            .map_err(|e| StoreError::Invalid(format!("tracker folder: {e}")))?;
        let db = dir.join("tracker.db");
        let recorded = identity::recorded(dir)?;
        identity::check_file(&db, recorded.as_deref())?;
        let fresh = !db.exists();
        let conn = Connection::open(&db)?;
        // Nothing is written (not even the journal mode) to a database that
        // is not this folder's.
        let unsealed = identity::verify(&conn, recorded.as_deref(), fresh)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let mut store = Store {
            conn,
            clock_skew_ms: 0,
        };
        store.migrate()?;
        if unsealed {
            identity::seal(&store.conn, dir)?;
        }
        Ok(store)
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew(version));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        Ok(())
    }

    /// The store's clock, in ms since the epoch.
    pub fn now(&self) -> i64 {
        now_ms() + self.clock_skew_ms
    }

    /// Test hook: moves this store's clock forward (lease expiry, drift)
    /// without sleeping. Never used by the service.
    #[doc(hidden)]
    pub fn advance_clock(&mut self, ms: i64) {
        self.clock_skew_ms += ms;
    }

    /// Runs one write: one immediate transaction that checks and records
    /// the idempotency key, runs `f`, and appends the audit row.
    fn write<T, F>(
        &mut self,
        who: Who<'_>,
        tool: &str,
        key: Option<&str>,
        f: F,
    ) -> Result<Written<T>, StoreError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(&mut Tx<'_>) -> Result<T, StoreError>,
    {
        if let Some(k) = key {
            check_key(k)?;
        }
        let now = self.now();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let canonical = receipt_tool(tool);
        if let Some(k) = key
            && let Some((was, result)) = receipt(&tx, who.actor, k)?
        {
            if receipt_tool(&was) != canonical {
                return Err(StoreError::Conflict(format!(
                    "idempotency key {k} was used for {was}, not {tool}"
                )));
            }
            return Ok(Written {
                value: serde_json::from_value(result)?,
                replayed: true,
            });
        }
        let mut w = Tx {
            tx,
            actor: who.actor.to_string(),
            now,
            first: None,
        };
        let value = f(&mut w)?;
        let Tx { tx, first, .. } = w;
        let (entity, entity_id) = first.unwrap_or_else(|| ("none".into(), String::new()));
        tx.execute(
            "INSERT INTO audit (actor, role, tool, entity, entity_id, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![who.actor, who.role.map(Role::as_str), tool, entity, entity_id, now],
        )?;
        if let Some(k) = key {
            record_receipt(
                &tx,
                who.actor,
                k,
                canonical,
                &serde_json::to_value(&value)?,
                now,
            )?;
        }
        tx.commit()?;
        Ok(Written {
            value,
            replayed: false,
        })
    }

    /// Creates a team with a display key (`TEAM` in `TEAM-n`).
    pub fn create_team(&mut self, key: &str, name: &str, actor: &str) -> Result<Team, StoreError> {
        valid_team_key(key)?;
        let who = Who { actor, role: None };
        let written = self.write(who, "create_team", None, |w| {
            let team = Team {
                id: new_id(),
                key: key.into(),
                name: name.into(),
                cut_over: false,
            };
            w.execute(
                "INSERT INTO teams (id, key, name, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![team.id, team.key, team.name, w.now],
            )
            .map_err(|e| {
                if is_constraint(&e) {
                    StoreError::Conflict(format!("team {key} exists"))
                } else {
                    StoreError::Sqlite(e)
                }
            })?;
            w.change("team", &team.id, "create")?;
            Ok(team)
        })?;
        Ok(written.value)
    }

    /// Creates a team cut over from Linear, or marks an existing team cut
    /// over: imported issues keep their Linear identifiers, and issues
    /// created here get `LOCAL-TEAM-n`.
    pub fn cut_over_team(
        &mut self,
        key: &str,
        name: &str,
        actor: &str,
    ) -> Result<Team, StoreError> {
        valid_team_key(key)?;
        let who = Who { actor, role: None };
        let written = self.write(who, "cut_over_team", None, |w| {
            let existing = one(
                w,
                "SELECT * FROM teams WHERE key = ?1",
                params![key],
                team_from_row,
            )?;
            let team = match existing {
                Some(mut t) => {
                    w.execute(
                        "UPDATE teams SET cut_over = 1, name = ?2 WHERE id = ?1",
                        params![t.id, name],
                    )?;
                    t.cut_over = true;
                    t.name = name.into();
                    w.change("team", &t.id, "cut-over")?;
                    t
                }
                None => {
                    let t = Team {
                        id: new_id(),
                        key: key.into(),
                        name: name.into(),
                        cut_over: true,
                    };
                    w.execute(
                        "INSERT INTO teams (id, key, name, created_at, cut_over) VALUES (?1, ?2, ?3, ?4, 1)",
                        params![t.id, t.key, t.name, w.now],
                    )?;
                    w.change("team", &t.id, "create")?;
                    t
                }
            };
            Ok(team)
        })?;
        Ok(written.value)
    }

    /// Imports an issue into a cut-over team, keeping its Linear identifier
    /// (`VUH-12`) and Linear UUID.
    #[allow(clippy::too_many_arguments)]
    pub fn import_issue(
        &mut self,
        team_key: &str,
        identifier: &str,
        linear_uuid: &str,
        title: &str,
        description: &str,
        state: &str,
        actor: &str,
    ) -> Result<Issue, StoreError> {
        let (state, state_type) = resolve_state(Some(state))?;
        if title.trim().is_empty() || linear_uuid.trim().is_empty() {
            return Err(StoreError::Invalid(
                "an imported issue needs a title and its Linear UUID".into(),
            ));
        }
        let who = Who { actor, role: None };
        let written = self.write(who, "import_issue", None, |w| {
            let team = find_team(w, team_key)?;
            if !team.cut_over {
                return Err(StoreError::Invalid(format!(
                    "team {} is not cut over from Linear",
                    team.key
                )));
            }
            let number = identifier
                .strip_prefix(&format!("{}-", team.key))
                .and_then(|n| n.parse::<i64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "{identifier} is not an identifier of team {}",
                        team.key
                    ))
                })?;
            let issue = Issue {
                id: new_id(),
                identifier: identifier.to_string(),
                team_id: team.id,
                title: title.into(),
                description: description.into(),
                state,
                state_type,
                priority: 0,
                assignee: None,
                labels: Vec::new(),
                parent_id: None,
                cycle: None,
                milestone: None,
                project_id: None,
                linear_id: Some(linear_uuid.to_string()),
                created_by: actor.into(),
                created_at: w.now,
                updated_at: w.now,
            };
            insert_issue(w, &issue, number).map_err(|e| match e {
                StoreError::Sqlite(e) if is_constraint(&e) => StoreError::Conflict(format!(
                    "{identifier} or Linear issue {linear_uuid} is already here"
                )),
                e => e,
            })?;
            w.change("issue", &issue.id, "import")?;
            Ok(issue)
        })?;
        Ok(written.value)
    }

    /// Whether a reference names an item of a cut-over team in this store:
    /// an issue (identifier, UUID or Linear UUID), the team (key or id) or
    /// one of its projects (id or name). The host routes such calls here.
    pub fn owns_item(&self, reference: &str) -> Result<bool, StoreError> {
        let reference = reference.trim();
        if reference.is_empty() {
            return Ok(false);
        }
        let hit: Option<i64> = self
            .conn
            .query_row(
                "SELECT 1 FROM issues i JOIN teams t ON t.id = i.team_id
                   WHERE t.cut_over = 1 AND (i.id = ?1 OR i.identifier = upper(?1) OR i.linear_id = ?1)
                 UNION ALL
                 SELECT 1 FROM teams WHERE cut_over = 1 AND (key = upper(?1) OR id = ?1)
                 UNION ALL
                 SELECT 1 FROM projects p JOIN teams t ON t.id = p.team_id
                   WHERE t.cut_over = 1 AND (p.id = ?1 OR lower(p.name) = lower(?1))
                 LIMIT 1",
                params![reference],
                |r| r.get(0),
            )
            .optional()?;
        Ok(hit.is_some())
    }

    /// A team by key, id or name.
    pub fn team(&self, key_or_id: &str) -> Result<Team, StoreError> {
        find_team(&self.conn, key_or_id)
    }

    /// Teams by key, optionally whose key or name contains `query`.
    pub fn teams(&self, query: Option<&str>, limit: Option<i64>) -> Result<Vec<Team>, StoreError> {
        all(
            &self.conn,
            "SELECT * FROM teams
             WHERE ?1 IS NULL OR instr(lower(key), lower(?1)) > 0 OR instr(lower(name), lower(?1)) > 0
             ORDER BY key LIMIT ?2",
            params![query, page_limit(limit)],
            team_from_row,
        )
    }

    /// An issue by id, identifier (`TEAM-n`) or Linear UUID.
    pub fn issue(&self, id: &str) -> Result<Issue, StoreError> {
        find_issue(&self.conn, id)
    }

    /// Child issues of an issue, oldest first.
    pub fn children(&self, issue: &str) -> Result<Vec<Issue>, StoreError> {
        let id = self.issue(issue)?.id;
        all(
            &self.conn,
            "SELECT * FROM issues WHERE parent_id = ?1 ORDER BY created_at, id",
            params![id],
            issue_from_row,
        )
    }

    /// Issues of a team (or all), optionally of one state category,
    /// newest first.
    pub fn issues(
        &self,
        team: Option<&str>,
        state_type: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Issue>, StoreError> {
        let team_id = match team {
            Some(t) => Some(self.team(t)?.id),
            None => None,
        };
        all(
            &self.conn,
            "SELECT * FROM issues
             WHERE (?1 IS NULL OR team_id = ?1) AND (?2 IS NULL OR state_type = ?2)
             ORDER BY updated_at DESC LIMIT ?3",
            params![team_id, state_type, limit.min(250) as i64],
            issue_from_row,
        )
    }

    /// One page of issues matching `q`, most recently updated (or created)
    /// first. `me` resolves the assignee "me".
    pub fn query_issues(&self, q: &IssueQuery, me: &str) -> Result<Page<Issue>, StoreError> {
        use rusqlite::types::Value as Sql;
        let mut conds: Vec<&str> = Vec::new();
        let mut vals: Vec<Sql> = Vec::new();
        if let Some(t) = &q.team {
            conds.push("team_id = ?");
            vals.push(Sql::Text(self.team(t)?.id));
        }
        if let Some(s) = &q.state {
            if let Some((name, _)) = state_type(s) {
                conds.push("state = ?");
                vals.push(Sql::Text(name.into()));
            } else if crate::vocabulary::STATE_TYPES.contains(&s.to_ascii_lowercase().as_str()) {
                conds.push("state_type = ?");
                vals.push(Sql::Text(s.to_ascii_lowercase()));
            } else {
                return Err(StoreError::Invalid(format!("unknown state {s}")));
            }
        }
        if let Some(a) = &q.assignee {
            conds.push("assignee = ?");
            vals.push(Sql::Text(if a == "me" { me.into() } else { a.clone() }));
        }
        if let Some(l) = &q.label {
            conds.push(
                "EXISTS (SELECT 1 FROM json_each(issues.labels) WHERE lower(value) = lower(?))",
            );
            vals.push(Sql::Text(l.clone()));
        }
        if let Some(p) = &q.project {
            conds.push("project_id = ?");
            vals.push(Sql::Text(plan::find_project(&self.conn, p)?.id));
        }
        if let Some(c) = &q.cycle {
            conds.push("cycle = ?");
            vals.push(Sql::Text(plan::find_cycle(&self.conn, c, None)?.id));
        }
        if let Some(p) = &q.parent {
            conds.push("parent_id = ?");
            vals.push(Sql::Text(self.issue(p)?.id));
        }
        if let Some(t) = &q.text {
            conds.push(
                "(instr(lower(identifier), lower(?)) > 0 OR instr(lower(title), lower(?)) > 0
                  OR instr(lower(description), lower(?)) > 0)",
            );
            for _ in 0..3 {
                vals.push(Sql::Text(t.clone()));
            }
        }
        let col = if q.order_by_created {
            "created_at"
        } else {
            "updated_at"
        };
        let keyset;
        if let Some(c) = &q.cursor {
            let (ts, id) = c
                .split_once('/')
                .and_then(|(ts, id)| ts.parse::<i64>().ok().map(|ts| (ts, id.to_string())))
                .ok_or_else(|| StoreError::Invalid(format!("cursor {c} is not from this list")))?;
            keyset = format!("({col} < ? OR ({col} = ? AND id < ?))");
            conds.push(&keyset);
            vals.push(Sql::Integer(ts));
            vals.push(Sql::Integer(ts));
            vals.push(Sql::Text(id));
        }
        let limit = page_limit(q.limit);
        vals.push(Sql::Integer(limit + 1));
        let sql = format!(
            "SELECT * FROM issues {} {} ORDER BY {col} DESC, id DESC LIMIT ?",
            if conds.is_empty() { "" } else { "WHERE" },
            conds.join(" AND ")
        );
        let mut items = all(
            &self.conn,
            &sql,
            rusqlite::params_from_iter(vals),
            issue_from_row,
        )?;
        let has_more = items.len() as i64 > limit;
        items.truncate(limit as usize);
        let cursor = if has_more {
            items.last().map(|i| {
                let ts = if q.order_by_created {
                    i.created_at
                } else {
                    i.updated_at
                };
                format!("{ts}/{}", i.id)
            })
        } else {
            None
        };
        Ok(Page {
            items,
            cursor,
            has_more,
        })
    }

    /// Creates or updates an issue as a trusted `actor`.
    pub fn save_issue(
        &mut self,
        actor: &str,
        input: SaveIssue,
    ) -> Result<Written<Issue>, StoreError> {
        self.save_issue_by(Who { actor, role: None }, "save_issue", input)
    }

    /// Creates or updates an issue as a caller with a role: limited roles
    /// cannot set `cycle` or a completed-category state.
    pub fn save_issue_as(
        &mut self,
        caller: &Caller,
        input: SaveIssue,
    ) -> Result<Written<Issue>, StoreError> {
        if caller.role.limited() {
            let role = caller.role;
            if input.cycle.is_some() {
                return Err(StoreError::NotAllowed {
                    role,
                    what: format!("save_issue cannot set cycle for the {role} role"),
                });
            }
            if let Some(s) = &input.state
                && crate::vocabulary::is_completed_state(s)
            {
                return Err(StoreError::NotAllowed {
                    role,
                    what: format!(
                        "save_issue cannot move an issue to the completed state {s} for the {role} role"
                    ),
                });
            }
        }
        self.save_issue_by(caller.who(), "save_issue", input)
    }

    fn save_issue_by(
        &mut self,
        who: Who<'_>,
        tool: &str,
        input: SaveIssue,
    ) -> Result<Written<Issue>, StoreError> {
        let key = input.idempotency_key.clone();
        self.write(who, tool, key.as_deref(), |w| match &input.id {
            None => create_issue(w, &input),
            Some(id) => update_issue(w, id, &input),
        })
    }

    /// Sets an issue's state, completed states included (lead only).
    pub fn save_issue_status(
        &mut self,
        caller: &Caller,
        input: SaveIssueStatus,
    ) -> Result<Written<Issue>, StoreError> {
        caller.who().require_lead("save_issue_status")?;
        let update = SaveIssue {
            id: Some(input.id),
            state: Some(input.state),
            if_updated_at: input.if_updated_at,
            idempotency_key: input.idempotency_key,
            ..Default::default()
        };
        self.save_issue_by(caller.who(), "save_issue_status", update)
    }

    /// Adds a comment to an issue as `actor`.
    pub fn save_comment(
        &mut self,
        actor: &str,
        issue: &str,
        body: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Written<Comment>, StoreError> {
        let input = SaveComment {
            issue_id: Some(issue.into()),
            body: body.into(),
            idempotency_key: idempotency_key.map(str::to_string),
            ..Default::default()
        };
        self.save_comment_by(Who { actor, role: None }, "save_comment", input)
    }

    /// Adds a comment, or edits one (`id`): only its author, the lead or
    /// the owner may edit a comment.
    pub fn save_comment_as(
        &mut self,
        caller: &Caller,
        tool: &str,
        input: SaveComment,
    ) -> Result<Written<Comment>, StoreError> {
        self.save_comment_by(caller.who(), tool, input)
    }

    fn save_comment_by(
        &mut self,
        who: Who<'_>,
        tool: &str,
        input: SaveComment,
    ) -> Result<Written<Comment>, StoreError> {
        if input.body.trim().is_empty() {
            return Err(StoreError::Invalid("a comment needs a body".into()));
        }
        let key = input.idempotency_key.clone();
        self.write(who, tool, key.as_deref(), |w| {
            if let Some(id) = &input.id {
                let mut c = one(
                    w,
                    "SELECT * FROM comments WHERE id = ?1",
                    params![id],
                    comment_from_row,
                )?
                .ok_or_else(|| StoreError::NotFound(format!("comment {id}")))?;
                who.own_only(&c.author, "editing another author's comment")?;
                if let Some(issue) = &input.issue_id
                    && find_issue(w, issue)?.id != c.issue_id
                {
                    return Err(StoreError::Invalid(format!(
                        "comment {id} is not on issue {issue}"
                    )));
                }
                check_fresh(input.if_updated_at, c.updated_at, &format!("comment {id}"))?;
                c.body = input.body.clone();
                c.updated_at = bump(w.now, c.updated_at);
                w.execute(
                    "UPDATE comments SET body = ?2, updated_at = ?3 WHERE id = ?1",
                    params![c.id, c.body, c.updated_at],
                )?;
                w.change("comment", &c.id, "update")?;
                return Ok(c);
            }
            let issue = required(input.issue_id.as_deref(), "issueId")?;
            let issue_id = find_issue(w, issue)?.id;
            let comment = Comment {
                id: new_id(),
                issue_id,
                body: input.body.clone(),
                author: w.actor.clone(),
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO comments (id, issue_id, body, author, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![
                    comment.id,
                    comment.issue_id,
                    comment.body,
                    comment.author,
                    comment.created_at
                ],
            )?;
            w.change("comment", &comment.id, "create")?;
            Ok(comment)
        })
    }

    /// Comments of an issue, oldest first.
    pub fn comments(&self, issue: &str) -> Result<Vec<Comment>, StoreError> {
        let id = self.issue(issue)?.id;
        all(
            &self.conn,
            "SELECT * FROM comments WHERE issue_id = ?1 ORDER BY created_at, id",
            params![id],
            comment_from_row,
        )
    }

    /// Changes after cursor `after`, at most `limit`.
    pub fn changes(&self, after: i64, limit: usize) -> Result<Vec<Change>, StoreError> {
        all(
            &self.conn,
            "SELECT * FROM changes WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            params![after, limit.clamp(1, 500) as i64],
            change_from_row,
        )
    }

    /// The newest change cursor.
    pub fn cursor(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM changes", [], |r| {
                r.get(0)
            })?)
    }

    /// The audit log, newest first: rows older than `before` (a seq), by
    /// one actor or all.
    pub fn audit_events(
        &self,
        actor: Option<&str>,
        before: Option<i64>,
        limit: Option<i64>,
    ) -> Result<Vec<AuditEvent>, StoreError> {
        all(
            &self.conn,
            "SELECT * FROM audit WHERE (?1 IS NULL OR actor = ?1) AND (?2 IS NULL OR seq < ?2)
             ORDER BY seq DESC LIMIT ?3",
            params![actor, before, page_limit(limit)],
            audit_from_row,
        )
    }

    /// Audited writes by `actor`.
    pub fn count_writes(&self, actor: &str) -> Result<i64, StoreError> {
        Ok(self.conn.query_row(
            "SELECT COUNT(*) FROM audit WHERE actor = ?1",
            params![actor],
            |r| r.get(0),
        )?)
    }

    /// The result `actor` recorded under an idempotency key.
    pub fn write_receipt(&self, actor: &str, key: &str) -> Result<Receipt, StoreError> {
        let row: Option<(String, String, i64)> = self
            .conn
            .query_row(
                "SELECT tool, result, created_at FROM write_receipts WHERE actor = ?1 AND key = ?2",
                params![actor, key],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let (tool, result, created_at) =
            row.ok_or_else(|| StoreError::NotFound(format!("no write of yours under key {key}")))?;
        Ok(Receipt {
            idempotency_key: key.into(),
            tool,
            result: serde_json::from_str(&result)?,
            created_at,
        })
    }

    /// The actors this tracker has seen (writers, assignees, commenters)
    /// and `me`, by name; optionally those whose name contains `query`.
    pub fn users(
        &self,
        me: &str,
        query: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<User>, StoreError> {
        let rows: Vec<(String, i64, Option<i64>)> = {
            let mut stmt = self.conn.prepare(
                "SELECT name, SUM(writes), MAX(last) FROM (
                    SELECT actor AS name, COUNT(*) AS writes, MAX(at) AS last FROM audit GROUP BY actor
                    UNION ALL SELECT actor, 0, MAX(at) FROM changes GROUP BY actor
                    UNION ALL SELECT assignee, 0, NULL FROM issues WHERE assignee IS NOT NULL GROUP BY assignee
                    UNION ALL SELECT author, 0, MAX(created_at) FROM comments GROUP BY author
                    UNION ALL SELECT ?1, 0, NULL
                 ) WHERE ?2 IS NULL OR instr(lower(name), lower(?2)) > 0
                 GROUP BY name ORDER BY name LIMIT ?3",
            )?;
            let rows = stmt.query_map(params![me, query, page_limit(limit)], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
            rows.collect::<Result<_, _>>()?
        };
        Ok(rows
            .into_iter()
            .map(|(name, writes, last)| User {
                id: name.clone(),
                is_me: name == me,
                name,
                writes,
                last_seen_at: last,
            })
            .collect())
    }

    /// One user: "me" is `me`; another name must have been seen here.
    pub fn user(&self, me: &str, query: &str) -> Result<User, StoreError> {
        let name = if query.eq_ignore_ascii_case("me") {
            me
        } else {
            query
        };
        self.users(me, Some(name), Some(crate::vocabulary::MAX_LIMIT))?
            .into_iter()
            .find(|u| u.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| StoreError::NotFound(format!("user {query}")))
    }
}

fn log_change(
    tx: &rusqlite::Transaction<'_>,
    entity: &str,
    id: &str,
    action: &str,
    actor: &str,
    at: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO changes (entity, entity_id, action, actor, at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![entity, id, action, actor, at],
    )?;
    Ok(())
}

/// The (tool, result) recorded under an actor's key.
fn receipt(
    tx: &rusqlite::Transaction<'_>,
    actor: &str,
    key: &str,
) -> Result<Option<(String, Value)>, StoreError> {
    let stored: Option<(String, String)> = tx
        .query_row(
            "SELECT tool, result FROM write_receipts WHERE actor = ?1 AND key = ?2",
            params![actor, key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(match stored {
        Some((tool, s)) => Some((tool, serde_json::from_str(&s)?)),
        None => None,
    })
}

fn record_receipt(
    tx: &rusqlite::Transaction<'_>,
    actor: &str,
    key: &str,
    tool: &str,
    result: &Value,
    at: i64,
) -> Result<(), StoreError> {
    check_key(key)?;
    tx.execute(
        "INSERT INTO write_receipts (key, actor, tool, result, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![key, actor, tool, result.to_string(), at],
    )?;
    Ok(())
}

fn resolve_state(name: Option<&str>) -> Result<(String, String), StoreError> {
    let name = name.unwrap_or("Backlog");
    state_type(name)
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .ok_or_else(|| StoreError::Invalid(format!("unknown state {name}")))
}

fn insert_issue(w: &Tx<'_>, issue: &Issue, number: i64) -> Result<(), StoreError> {
    w.execute(
        "INSERT INTO issues (id, team_id, number, identifier, title, description, state, state_type,
             priority, assignee, labels, parent_id, cycle, milestone, created_by, created_at, updated_at,
             project_id, linear_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
        params![
            issue.id,
            issue.team_id,
            number,
            issue.identifier,
            issue.title,
            issue.description,
            issue.state,
            issue.state_type,
            issue.priority,
            issue.assignee,
            serde_json::to_string(&issue.labels)?,
            issue.parent_id,
            issue.cycle,
            issue.milestone,
            issue.created_by,
            issue.created_at,
            issue.updated_at,
            issue.project_id,
            issue.linear_id
        ],
    )?;
    Ok(())
}

/// Labels without blanks or case-insensitive repeats, in order.
fn clean_labels(labels: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in labels {
        let l = l.trim();
        if !l.is_empty() && !out.iter().any(|o| o.eq_ignore_ascii_case(l)) {
            out.push(l.to_string());
        }
    }
    out
}

/// The optional references of a save: parent, project, cycle, milestone
/// and assignee, resolved against the store ("" clears).
fn apply_refs(w: &Tx<'_>, issue: &mut Issue, input: &SaveIssue) -> Result<(), StoreError> {
    if let Some(a) = &input.assignee {
        issue.assignee = match a.as_str() {
            "" => None,
            "me" => Some(w.actor.clone()),
            a => Some(a.to_string()),
        };
    }
    if let Some(p) = &input.parent_id {
        issue.parent_id = match non_empty(Some(p)) {
            None => None,
            Some(p) => {
                let parent = find_issue(w, p)?;
                // No issue may become its own ancestor.
                let mut at = Some(parent.clone());
                while let Some(a) = at {
                    if a.id == issue.id {
                        return Err(StoreError::Invalid(format!(
                            "{} cannot be a sub-issue of its own sub-issue {}",
                            issue.identifier, parent.identifier
                        )));
                    }
                    at = match a.parent_id {
                        Some(pid) => one(
                            w,
                            "SELECT * FROM issues WHERE id = ?1",
                            params![pid],
                            issue_from_row,
                        )?,
                        None => None,
                    };
                }
                Some(parent.id)
            }
        };
    }
    if let Some(p) = &input.project {
        issue.project_id = match non_empty(Some(p)) {
            None => None,
            Some(p) => Some(plan::find_project(w, p)?.id),
        };
    }
    if let Some(c) = &input.cycle {
        issue.cycle = match non_empty(Some(c)) {
            None => None,
            Some(c) => Some(plan::find_cycle(w, c, Some(&issue.team_id))?.id),
        };
    }
    if let Some(m) = &input.milestone {
        issue.milestone = match non_empty(Some(m)) {
            None => None,
            Some(m) => Some(plan::find_milestone(w, m, issue.project_id.as_deref())?.id),
        };
    }
    Ok(())
}

fn create_issue(w: &mut Tx<'_>, input: &SaveIssue) -> Result<Issue, StoreError> {
    let team = input
        .team
        .as_deref()
        .ok_or_else(|| StoreError::Invalid("a new issue needs a team".into()))?;
    let title = input
        .title
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| StoreError::Invalid("a new issue needs a title".into()))?;
    let team = find_team(w, team)?;
    let number: i64 = w.query_row(
        "SELECT next_number FROM teams WHERE id = ?1",
        params![team.id],
        |r| r.get(0),
    )?;
    w.execute(
        "UPDATE teams SET next_number = next_number + 1 WHERE id = ?1",
        params![team.id],
    )?;
    let (state, state_type) = resolve_state(input.state.as_deref())?;
    let identifier = if team.cut_over {
        format!("LOCAL-{}-{number}", team.key)
    } else {
        format!("{}-{number}", team.key)
    };
    let mut issue = Issue {
        id: new_id(),
        identifier,
        team_id: team.id,
        title: title.into(),
        description: input.description.clone().unwrap_or_default(),
        state,
        state_type,
        priority: input.priority.unwrap_or(0).clamp(0, 4),
        assignee: None,
        labels: clean_labels(input.labels.as_deref().unwrap_or_default()),
        parent_id: None,
        cycle: None,
        milestone: None,
        project_id: None,
        linear_id: None,
        created_by: w.actor.clone(),
        created_at: w.now,
        updated_at: w.now,
    };
    apply_refs(w, &mut issue, input)?;
    insert_issue(w, &issue, number).map_err(|e| match e {
        StoreError::Sqlite(e) if is_constraint(&e) => {
            StoreError::Conflict(format!("{} already exists", issue.identifier))
        }
        e => e,
    })?;
    w.change("issue", &issue.id, "create")?;
    Ok(issue)
}

fn update_issue(w: &mut Tx<'_>, id: &str, input: &SaveIssue) -> Result<Issue, StoreError> {
    let mut issue = find_issue(w, id)?;
    check_fresh(input.if_updated_at, issue.updated_at, &issue.identifier)?;
    if let Some(team) = &input.team
        && find_team(w, team)?.id != issue.team_id
    {
        return Err(StoreError::Invalid(format!(
            "{} cannot move to another team",
            issue.identifier
        )));
    }
    if let Some(t) = &input.title {
        if t.trim().is_empty() {
            return Err(StoreError::Invalid("a title cannot be empty".into()));
        }
        issue.title = t.clone();
    }
    if let Some(d) = &input.description {
        issue.description = d.clone();
    }
    if let Some(s) = &input.state {
        let (state, state_type) = resolve_state(Some(s))?;
        issue.state = state;
        issue.state_type = state_type;
    }
    if let Some(p) = input.priority {
        issue.priority = p.clamp(0, 4);
    }
    if let Some(l) = &input.labels {
        issue.labels = clean_labels(l);
    }
    apply_refs(w, &mut issue, input)?;
    issue.updated_at = bump(w.now, issue.updated_at);
    w.execute(
        "UPDATE issues SET title = ?2, description = ?3, state = ?4, state_type = ?5, priority = ?6,
             assignee = ?7, labels = ?8, parent_id = ?9, cycle = ?10, milestone = ?11, updated_at = ?12,
             project_id = ?13
         WHERE id = ?1",
        params![
            issue.id,
            issue.title,
            issue.description,
            issue.state,
            issue.state_type,
            issue.priority,
            issue.assignee,
            serde_json::to_string(&issue.labels)?,
            issue.parent_id,
            issue.cycle,
            issue.milestone,
            issue.updated_at,
            issue.project_id
        ],
    )?;
    w.change("issue", &issue.id, "update")?;
    Ok(issue)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tmp");
        let s = Store::open(&dir.path().join("tracker")).expect("open");
        (dir, s)
    }

    fn new_issue(team: &str, title: &str, key: Option<&str>) -> SaveIssue {
        SaveIssue {
            team: Some(team.into()),
            title: Some(title.into()),
            idempotency_key: key.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn issues_get_display_keys_and_a_repeated_key_writes_once() {
        let (_d, mut s) = store();
        s.create_team("ENG", "Engineering", "lead").expect("team");
        assert!(matches!(
            s.create_team("ENG", "again", "lead"),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            s.create_team("LOCAL-ENG", "clash", "lead"),
            Err(StoreError::Invalid(_))
        ));
        let a = s
            .save_issue("w1", new_issue("ENG", "first", Some("k1")))
            .expect("a");
        assert_eq!(a.value.identifier, "ENG-1");
        assert_eq!(a.value.state_type, "backlog");
        let again = s
            .save_issue("w1", new_issue("ENG", "first", Some("k1")))
            .expect("again");
        assert!(again.replayed);
        assert_eq!(again.value, a.value);
        // The same key from another actor is that actor's own write.
        let other = s
            .save_issue("w2", new_issue("ENG", "second", Some("k1")))
            .expect("b");
        assert_eq!(other.value.identifier, "ENG-2");
        assert_eq!(s.issues(Some("ENG"), None, 50).expect("list").len(), 2);
        let changes = s.changes(0, 100).expect("changes");
        assert_eq!(
            changes.iter().filter(|c| c.entity == "issue").count(),
            2,
            "the repeat wrote nothing"
        );
    }

    #[test]
    fn a_stale_if_updated_at_refuses_and_writes_nothing() {
        let (_d, mut s) = store();
        s.create_team("ENG", "Engineering", "lead").expect("team");
        let a = s
            .save_issue("w1", new_issue("ENG", "first", None))
            .expect("a")
            .value;
        let moved = s
            .save_issue(
                "w1",
                SaveIssue {
                    id: Some(a.identifier.clone()),
                    state: Some("in progress".into()),
                    if_updated_at: Some(a.updated_at),
                    ..Default::default()
                },
            )
            .expect("update")
            .value;
        assert_eq!(moved.state, "In Progress");
        assert_eq!(moved.state_type, "started");
        assert!(moved.updated_at > a.updated_at);
        let before = s.cursor().expect("cursor");
        let stale = s.save_issue(
            "w2",
            SaveIssue {
                id: Some(a.id.clone()),
                title: Some("renamed".into()),
                if_updated_at: Some(a.updated_at),
                ..Default::default()
            },
        );
        assert!(matches!(stale, Err(StoreError::Conflict(_))));
        assert_eq!(s.cursor().expect("cursor"), before);
        assert_eq!(s.issue(&a.id).expect("issue").title, "first");
        assert!(matches!(
            s.save_issue(
                "w1",
                SaveIssue {
                    id: Some(a.id.clone()),
                    state: Some("Nonsense".into()),
                    ..Default::default()
                }
            ),
            Err(StoreError::Invalid(_))
        ));
    }

    #[test]
    fn a_version_one_database_is_migrated_in_place() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("tracker");
        std::fs::create_dir_all(&path).expect("dir");
        {
            let conn = Connection::open(path.join("tracker.db")).expect("raw");
            conn.execute_batch(MIGRATIONS[0]).expect("v1");
            conn.pragma_update(None, "user_version", 1)
                .expect("version");
            conn.execute_batch(
                "INSERT INTO teams (id, key, name, next_number, created_at) VALUES ('t1', 'ENG', 'Eng', 2, 10);
                 INSERT INTO issues (id, team_id, number, identifier, title, state, state_type, created_by,
                     created_at, updated_at) VALUES ('i1', 't1', 1, 'ENG-1', 'old', 'Todo', 'unstarted', 'w1', 10, 10);
                 INSERT INTO comments (id, issue_id, body, author, created_at) VALUES ('c1', 'i1', 'hi', 'w1', 11);
                 INSERT INTO changes (entity, entity_id, action, actor, at) VALUES ('issue', 'i1', 'create', 'w1', 10);",
            )
            .expect("v1 rows");
            // A receipt recorded by the first build, without the new fields.
            let old = serde_json::json!({
                "id": "i1", "identifier": "ENG-1", "teamId": "t1", "title": "old", "description": "",
                "state": "Todo", "stateType": "unstarted", "priority": 0, "assignee": null, "labels": [],
                "parentId": null, "cycle": null, "milestone": null, "createdBy": "w1",
                "createdAt": 10, "updatedAt": 10
            });
            conn.execute(
                "INSERT INTO write_receipts (key, actor, tool, result, created_at) VALUES ('k', 'w1', 'save_issue', ?1, 10)",
                params![old.to_string()],
            )
            .expect("receipt");
        }
        let mut s = Store::open(&path).expect("migrate");
        let version: i64 = s
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, SCHEMA_VERSION);
        let i = s.issue("eng-1").expect("issue");
        assert_eq!((i.title.as_str(), i.project_id.clone()), ("old", None));
        assert!(!s.team("ENG").expect("team").cut_over);
        let c = s.comments("ENG-1").expect("comments");
        assert_eq!(
            c[0].updated_at, 11,
            "old comments get updatedAt = createdAt"
        );
        let replay = s
            .save_issue("w1", new_issue("ENG", "old", Some("k")))
            .expect("replay");
        assert!(replay.replayed);
        assert_eq!(replay.value.id, "i1");
        let next = s
            .save_issue("w1", new_issue("ENG", "new", None))
            .expect("new");
        assert_eq!(next.value.identifier, "ENG-2");
        assert_eq!(s.count_writes("w1").expect("writes"), 1);
        assert_eq!(s.cursor().expect("cursor"), 2);
    }

    #[test]
    fn comments_and_the_change_cursor_survive_reopening() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("tracker");
        {
            let mut s = Store::open(&path).expect("open");
            s.create_team("OPS", "Ops", "lead").expect("team");
            let i = s
                .save_issue("w1", new_issue("OPS", "pager", None))
                .expect("i")
                .value;
            s.save_comment("w1", &i.identifier, "looking", Some("c1"))
                .expect("comment");
            let again = s
                .save_comment("w1", &i.identifier, "looking", Some("c1"))
                .expect("again");
            assert!(again.replayed);
        }
        let s = Store::open(&path).expect("reopen");
        let comments = s.comments("OPS-1").expect("comments");
        assert_eq!(comments.len(), 1);
        assert_eq!(comments[0].author, "w1");
        let all = s.changes(0, 10).expect("changes");
        assert_eq!(
            all.iter().map(|c| c.action.as_str()).collect::<Vec<_>>(),
            ["create", "create", "create"]
        );
        assert_eq!(s.changes(all[1].seq, 10).expect("after").len(), 1);
        // A database from a newer build is refused, never rewritten.
        drop(s);
        let conn = Connection::open(path.join("tracker.db")).expect("raw");
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .expect("bump");
        drop(conn);
        assert!(matches!(Store::open(&path), Err(StoreError::TooNew(_))));
    }
}
