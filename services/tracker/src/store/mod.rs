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

// The store itself, by concern; `pub(super)` items are shared between them.
mod history;
mod issues;
mod schema;
mod tx;
pub use tx::BatchJob;

use issues::*;
use tx::*;

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
    LeaseResult, LeaseSlot, PostBundleCheck, PostIssueAsk, PostIssueEvent, Run, RunControl,
    SaveEvidenceBundle, SaveLease, SaveRun,
};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 3;

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
    /// The write ran in a batch whose one commit failed: nothing of it
    /// applied.
    #[error("not committed: {0}")]
    Uncommitted(String),
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

    fn who(&self) -> Writer<'_> {
        Writer {
            actor: &self.actor,
            role: Some(self.role),
        }
    }
}

/// The writer of one transaction: a role for tool calls, none for trusted
/// store calls.
#[derive(Debug, Clone, Copy)]
struct Writer<'a> {
    actor: &'a str,
    role: Option<Role>,
}

impl Writer<'_> {
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
    /// Inside [`Store::batch`]: each write is a savepoint of the batch's
    /// one transaction instead of a transaction of its own.
    batched: bool,
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
            batched: false,
        };
        store.migrate()?;
        if unsealed {
            identity::seal(&store.conn, dir)?;
        }
        Ok(store)
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
}

#[cfg(test)]
mod tests;
