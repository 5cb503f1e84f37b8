//! The tracker's SQLite store.
//!
//! - One database file, `tracker.db`, in WAL mode with `synchronous=FULL`:
//!   a committed write survives `kill -9` and power loss alike.
//! - Migrations are numbered by `PRAGMA user_version`; a database newer than
//!   this build is refused rather than guessed at.
//! - Every write runs in one immediate transaction that also appends to the
//!   change log and, when the caller gave an idempotency key, records the
//!   result under that key. A repeated key returns the recorded result and
//!   writes nothing.
//! - `ifUpdatedAt` makes an update conditional on the version the caller
//!   read; `updatedAt` strictly increases on every write of a row.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

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
];

/// The workflow states every team starts with: (name, category).
pub const STATES: &[(&str, &str)] = &[
    ("Backlog", "backlog"),
    ("Todo", "unstarted"),
    ("In Progress", "started"),
    ("In Review", "started"),
    ("Done", "completed"),
    ("Canceled", "canceled"),
    ("Duplicate", "canceled"),
];

/// The category of a state name, case-insensitively.
pub fn state_type(name: &str) -> Option<(&'static str, &'static str)> {
    STATES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .copied()
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("the tracker database is newer (schema {0}) than this build ({SCHEMA_VERSION})")]
    TooNew(i64),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Team {
    pub id: String,
    pub key: String,
    pub name: String,
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

/// `save_issue` input: create without `id`, update with it. Absent fields
/// are left as they are.
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
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
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
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
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
        labels: serde_json::from_str(&labels).unwrap_or_default(),
        parent_id: r.get("parent_id")?,
        cycle: r.get("cycle")?,
        milestone: r.get("milestone")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

impl Store {
    /// Opens (creating) `dir/tracker.db` and brings its schema up to date.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        clankie_runtime::state::private_dir(dir)
            .map_err(|e| StoreError::Invalid(format!("tracker folder: {e}")))?;
        let conn = Connection::open(dir.join("tracker.db"))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let mut store = Store { conn };
        store.migrate()?;
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

    /// Creates a team with a display key (`TEAM` in `TEAM-n`).
    pub fn create_team(&mut self, key: &str, name: &str, actor: &str) -> Result<Team, StoreError> {
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
        let team = Team {
            id: uuid::Uuid::new_v4().to_string(),
            key: key.into(),
            name: name.into(),
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = now_ms();
        tx.execute(
            "INSERT INTO teams (id, key, name, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![team.id, team.key, team.name, now],
        )
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _)
                if f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                StoreError::Conflict(format!("team {key} exists"))
            }
            e => StoreError::Sqlite(e),
        })?;
        log_change(&tx, "team", &team.id, "create", actor, now)?;
        tx.commit()?;
        Ok(team)
    }

    /// A team by key or id.
    pub fn team(&self, key_or_id: &str) -> Result<Team, StoreError> {
        self.conn
            .query_row(
                "SELECT id, key, name FROM teams WHERE key = ?1 OR id = ?1",
                params![key_or_id],
                |r| {
                    Ok(Team {
                        id: r.get(0)?,
                        key: r.get(1)?,
                        name: r.get(2)?,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("team {key_or_id}")))
    }

    /// An issue by id or identifier (`TEAM-n`).
    pub fn issue(&self, id: &str) -> Result<Issue, StoreError> {
        self.conn
            .query_row(
                "SELECT * FROM issues WHERE id = ?1 OR identifier = ?1",
                params![id],
                issue_from_row,
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("issue {id}")))
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
        let mut stmt = self.conn.prepare(
            "SELECT * FROM issues
             WHERE (?1 IS NULL OR team_id = ?1) AND (?2 IS NULL OR state_type = ?2)
             ORDER BY updated_at DESC LIMIT ?3",
        )?;
        let rows = stmt.query_map(
            params![team_id, state_type, limit.min(250) as i64],
            issue_from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Creates or updates an issue as `actor`.
    pub fn save_issue(
        &mut self,
        actor: &str,
        input: SaveIssue,
    ) -> Result<Written<Issue>, StoreError> {
        let key = input.idempotency_key.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(k) = &key
            && let Some(result) = receipt(&tx, actor, k)?
        {
            return Ok(Written {
                value: serde_json::from_value(result)?,
                replayed: true,
            });
        }
        let now = now_ms();
        let issue = match &input.id {
            None => create_issue(&tx, actor, &input, now)?,
            Some(id) => update_issue(&tx, actor, id, &input, now)?,
        };
        if let Some(k) = &key {
            record_receipt(
                &tx,
                actor,
                k,
                "save_issue",
                &serde_json::to_value(&issue)?,
                now,
            )?;
        }
        tx.commit()?;
        Ok(Written {
            value: issue,
            replayed: false,
        })
    }

    /// Adds a comment to an issue as `actor`.
    pub fn save_comment(
        &mut self,
        actor: &str,
        issue: &str,
        body: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Written<Comment>, StoreError> {
        if body.trim().is_empty() {
            return Err(StoreError::Invalid("a comment needs a body".into()));
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(k) = idempotency_key
            && let Some(result) = receipt(&tx, actor, k)?
        {
            return Ok(Written {
                value: serde_json::from_value(result)?,
                replayed: true,
            });
        }
        let issue_id: String = tx
            .query_row(
                "SELECT id FROM issues WHERE id = ?1 OR identifier = ?1",
                params![issue],
                |r| r.get(0),
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("issue {issue}")))?;
        let now = now_ms();
        let comment = Comment {
            id: uuid::Uuid::new_v4().to_string(),
            issue_id,
            body: body.into(),
            author: actor.into(),
            created_at: now,
        };
        tx.execute(
            "INSERT INTO comments (id, issue_id, body, author, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![comment.id, comment.issue_id, comment.body, comment.author, now],
        )?;
        log_change(&tx, "comment", &comment.id, "create", actor, now)?;
        if let Some(k) = idempotency_key {
            record_receipt(
                &tx,
                actor,
                k,
                "save_comment",
                &serde_json::to_value(&comment)?,
                now,
            )?;
        }
        tx.commit()?;
        Ok(Written {
            value: comment,
            replayed: false,
        })
    }

    /// Comments of an issue, oldest first.
    pub fn comments(&self, issue: &str) -> Result<Vec<Comment>, StoreError> {
        let id = self.issue(issue)?.id;
        let mut stmt = self.conn.prepare(
            "SELECT id, issue_id, body, author, created_at FROM comments
             WHERE issue_id = ?1 ORDER BY created_at, id",
        )?;
        let rows = stmt.query_map(params![id], |r| {
            Ok(Comment {
                id: r.get(0)?,
                issue_id: r.get(1)?,
                body: r.get(2)?,
                author: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Changes after cursor `after`, at most `limit`.
    pub fn changes(&self, after: i64, limit: usize) -> Result<Vec<Change>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT seq, entity, entity_id, action, actor, at FROM changes
             WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![after, limit.min(500) as i64], |r| {
            Ok(Change {
                seq: r.get(0)?,
                entity: r.get(1)?,
                entity_id: r.get(2)?,
                action: r.get(3)?,
                actor: r.get(4)?,
                at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The newest change cursor.
    pub fn cursor(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM changes", [], |r| {
                r.get(0)
            })?)
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

fn receipt(
    tx: &rusqlite::Transaction<'_>,
    actor: &str,
    key: &str,
) -> Result<Option<Value>, StoreError> {
    let stored: Option<String> = tx
        .query_row(
            "SELECT result FROM write_receipts WHERE actor = ?1 AND key = ?2",
            params![actor, key],
            |r| r.get(0),
        )
        .optional()?;
    Ok(match stored {
        Some(s) => Some(serde_json::from_str(&s)?),
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
    if key.is_empty() || key.len() > 200 {
        return Err(StoreError::Invalid(
            "an idempotency key is 1 to 200 bytes".into(),
        ));
    }
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

fn create_issue(
    tx: &rusqlite::Transaction<'_>,
    actor: &str,
    input: &SaveIssue,
    now: i64,
) -> Result<Issue, StoreError> {
    let team = input
        .team
        .as_deref()
        .ok_or_else(|| StoreError::Invalid("a new issue needs a team".into()))?;
    let title = input
        .title
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| StoreError::Invalid("a new issue needs a title".into()))?;
    let (team_id, key, number): (String, String, i64) = tx
        .query_row(
            "SELECT id, key, next_number FROM teams WHERE key = ?1 OR id = ?1",
            params![team],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("team {team}")))?;
    tx.execute(
        "UPDATE teams SET next_number = next_number + 1 WHERE id = ?1",
        params![team_id],
    )?;
    let (state, state_type) = resolve_state(input.state.as_deref())?;
    let issue = Issue {
        id: uuid::Uuid::new_v4().to_string(),
        identifier: format!("{key}-{number}"),
        team_id,
        title: title.into(),
        description: input.description.clone().unwrap_or_default(),
        state,
        state_type,
        priority: input.priority.unwrap_or(0).clamp(0, 4),
        assignee: input.assignee.clone(),
        labels: input.labels.clone().unwrap_or_default(),
        parent_id: input.parent_id.clone(),
        cycle: input.cycle.clone(),
        milestone: input.milestone.clone(),
        created_by: actor.into(),
        created_at: now,
        updated_at: now,
    };
    tx.execute(
        "INSERT INTO issues (id, team_id, number, identifier, title, description, state, state_type,
             priority, assignee, labels, parent_id, cycle, milestone, created_by, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
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
            issue.updated_at
        ],
    )?;
    log_change(tx, "issue", &issue.id, "create", actor, now)?;
    Ok(issue)
}

fn update_issue(
    tx: &rusqlite::Transaction<'_>,
    actor: &str,
    id: &str,
    input: &SaveIssue,
    now: i64,
) -> Result<Issue, StoreError> {
    let mut issue = tx
        .query_row(
            "SELECT * FROM issues WHERE id = ?1 OR identifier = ?1",
            params![id],
            issue_from_row,
        )
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("issue {id}")))?;
    if let Some(expected) = input.if_updated_at
        && expected != issue.updated_at
    {
        return Err(StoreError::Conflict(format!(
            "{} was updated at {}, not {expected}; read it again",
            issue.identifier, issue.updated_at
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
    if input.assignee.is_some() {
        issue.assignee = input.assignee.clone().filter(|a| !a.is_empty());
    }
    if let Some(l) = &input.labels {
        issue.labels = l.clone();
    }
    if input.parent_id.is_some() {
        issue.parent_id = input.parent_id.clone().filter(|p| !p.is_empty());
    }
    if input.cycle.is_some() {
        issue.cycle = input.cycle.clone().filter(|c| !c.is_empty());
    }
    if input.milestone.is_some() {
        issue.milestone = input.milestone.clone().filter(|m| !m.is_empty());
    }
    // Strictly increasing, even within one millisecond.
    issue.updated_at = now.max(issue.updated_at + 1);
    tx.execute(
        "UPDATE issues SET title = ?2, description = ?3, state = ?4, state_type = ?5, priority = ?6,
             assignee = ?7, labels = ?8, parent_id = ?9, cycle = ?10, milestone = ?11, updated_at = ?12
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
            issue.updated_at
        ],
    )?;
    log_change(tx, "issue", &issue.id, "update", actor, now)?;
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
