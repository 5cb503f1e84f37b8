//! The schema: numbered migrations applied in order under `PRAGMA
//! user_version`. Migration 1 never changes; a database newer than this build
//! is refused.

use super::*;

/// Migration 1 must never change: databases exist at every version.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // 3: leases held for saved Linear routes (Linear keeps none), keyed by
    // the connected resource and project they were taken under and the
    // issue reference as observed.
    "CREATE TABLE route_leases (
        resource TEXT NOT NULL,
        project TEXT NOT NULL,
        issue_ref TEXT NOT NULL,
        holder TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (resource, project, issue_ref)
    );
    CREATE INDEX route_leases_holder ON route_leases(holder, project);",
];

impl Store {
    pub(super) fn migrate(&mut self) -> Result<(), StoreError> {
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
}
