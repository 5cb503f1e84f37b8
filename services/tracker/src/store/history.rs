//! What happened: the change log behind `list_changes` and its cursor, the
//! audit log of writes, and the users the writes name.

use super::*;

pub(super) fn change_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Change> {
    Ok(Change {
        seq: r.get("seq")?,
        entity: r.get("entity")?,
        entity_id: r.get("entity_id")?,
        action: r.get("action")?,
        actor: r.get("actor")?,
        at: r.get("at")?,
    })
}

pub(super) fn audit_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AuditEvent> {
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

impl Store {
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
