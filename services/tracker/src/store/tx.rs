//! Writes: one immediate transaction per write that also appends to the
//! change log and the audit log, and records the result under the caller's
//! idempotency key (a repeated key returns the recorded result).
//!
//! Group commit ([`Store::batch`]): writes that arrive together run as
//! savepoints of one immediate transaction, so the batch pays for one
//! synced commit. A write that fails rolls back to its own savepoint and
//! leaves the others; no write is answered before the batch commits.

use super::*;

/// One call run inside [`Store::batch`].
pub type BatchJob<'a, R> = Box<dyn FnOnce(&mut Store) -> R + 'a>;

/// What one write runs in: its own transaction, or a savepoint of a batch.
pub(super) enum Open<'c> {
    Own(rusqlite::Transaction<'c>),
    InBatch(rusqlite::Savepoint<'c>),
}

impl std::ops::Deref for Open<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        match self {
            Open::Own(t) => t,
            Open::InBatch(s) => s,
        }
    }
}

impl Open<'_> {
    /// Commits its own transaction, or releases its savepoint into the
    /// batch (made durable by the batch's commit).
    fn commit(self) -> rusqlite::Result<()> {
        match self {
            Open::Own(t) => t.commit(),
            Open::InBatch(s) => s.commit(),
        }
    }
}

/// The open transaction of one write.
pub(super) struct Tx<'c> {
    pub(super) tx: Open<'c>,
    pub(super) actor: String,
    pub(super) now: i64,
    /// The first entity the write touched, for the audit row.
    pub(super) first: Option<(String, String)>,
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.tx
    }
}

impl Tx<'_> {
    /// Appends to the change log.
    pub(super) fn change(
        &mut self,
        entity: &str,
        id: &str,
        action: &str,
    ) -> Result<(), StoreError> {
        log_change(&self.tx, entity, id, action, &self.actor, self.now)?;
        if self.first.is_none() {
            self.first = Some((entity.to_string(), id.to_string()));
        }
        Ok(())
    }

    /// Names what the write is about without logging a change (a write
    /// that turned out to change nothing is still audited).
    pub(super) fn touch(&mut self, entity: &str, id: &str) {
        if self.first.is_none() {
            self.first = Some((entity.to_string(), id.to_string()));
        }
    }
}

/// The tool a receipt is recorded under: aliases share their tool's keys.
pub(super) fn receipt_tool(tool: &str) -> &str {
    match tool {
        "create_comment" => "save_comment",
        "create_issue_label" => "save_issue_label",
        t => t,
    }
}

pub(super) fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > 200 {
        return Err(StoreError::Invalid(
            "an idempotency key is 1 to 200 bytes".into(),
        ));
    }
    Ok(())
}

pub(super) fn log_change(
    tx: &Connection,
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
pub(super) fn receipt(
    tx: &Connection,
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

pub(super) fn record_receipt(
    tx: &Connection,
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

impl Store {
    /// Runs `jobs` in one immediate transaction and commits it once: each
    /// job's writes are savepoints of it. Returns each job's output and
    /// whether the commit made them durable. Should the transaction be
    /// lost midway (SQLite rolls a whole transaction back on some I/O
    /// errors), the jobs already run share the failed commit and the rest
    /// run on their own, each write in its own transaction as outside a
    /// batch; those count as committed here, since they committed
    /// themselves.
    pub fn batch<R>(&mut self, jobs: Vec<BatchJob<'_, R>>) -> Vec<(R, Result<(), StoreError>)> {
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            tracing::warn!(error = %e, "tracker batch not begun; its writes commit one by one");
            return jobs.into_iter().map(|j| (j(self), Ok(()))).collect();
        }
        self.batched = true;
        let mut jobs = jobs.into_iter();
        let mut in_batch = Vec::new();
        // A job runs in the batch only while its transaction is still open.
        while !self.conn.is_autocommit() {
            let Some(job) = jobs.next() else { break };
            in_batch.push(job(self));
        }
        self.batched = false;
        let committed = if self.conn.is_autocommit() {
            Err("the batch's transaction was rolled back".to_string())
        } else {
            self.conn.execute_batch("COMMIT").map_err(|e| {
                let _ = self.conn.execute_batch("ROLLBACK");
                e.to_string()
            })
        };
        let mut out: Vec<_> = in_batch
            .into_iter()
            .map(|r| (r, committed.clone().map_err(StoreError::Uncommitted)))
            .collect();
        out.extend(jobs.map(|j| (j(self), Ok(()))));
        out
    }

    /// Runs one write: one immediate transaction that checks and records
    /// the idempotency key, runs `f`, and appends the audit row.
    pub(super) fn write<T, F>(
        &mut self,
        who: Writer<'_>,
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
        let tx = if self.batched {
            Open::InBatch(self.conn.savepoint()?)
        } else {
            Open::Own(
                self.conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)?,
            )
        };
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
}
