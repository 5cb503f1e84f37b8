//! The derived id index of sealed buckets: receipt id → sequence number.
//!
//! Sealed buckets leave memory, so a receipt id that must never dispatch
//! twice is looked up here. The index is derived from the shards: it is
//! written (and synced) before the manifest that seals a bucket commits, so
//! a committed seal is always indexed, and it is rebuilt from the shards
//! when it is missing or unreadable. Its page cache is kept small so memory
//! does not grow with the history it indexes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clankie_runtime::{ClankieError, ErrorCode};
use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};

pub(super) const INDEX: &str = "connected-calls.index.sqlite";

/// Two connections: the writer's, and one for lookups, so a sealing
/// transaction never holds up a call's duplicate check (WAL readers do not
/// wait for the writer).
pub(super) struct IdIndex {
    write: Mutex<Connection>,
    read: Mutex<Connection>,
}

fn failed(e: rusqlite::Error) -> ClankieError {
    ErrorCode::ReceiptStoreUnavailable.err(format!("receipt id index: {e}"))
}

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let c = Connection::open(path)?;
    c.pragma_update(None, "journal_mode", "WAL")?;
    // The index is written only when buckets seal (once per 256 receipts)
    // and must be durable before the manifest that relies on it.
    c.pragma_update(None, "synchronous", "FULL")?;
    c.pragma_update(None, "cache_size", -256)?;
    c.pragma_update(None, "mmap_size", 0)?;
    c.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(c)
}

impl IdIndex {
    /// Opens the index; the flag is true when it was created afresh (or the
    /// old one moved aside as unreadable): the caller rebuilds it from the
    /// shards.
    pub fn open(dir: &Path) -> std::io::Result<(IdIndex, bool)> {
        let path = dir.join(INDEX);
        let existed = path.exists();
        let attempt = || -> rusqlite::Result<(Connection, Connection)> {
            let w = connect(&path)?;
            w.execute_batch(
                "CREATE TABLE IF NOT EXISTS receipts (id TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS buckets (id INTEGER PRIMARY KEY);",
            )?;
            let r = connect(&path)?;
            // Reads a page, so a damaged file is found now, not mid-call.
            r.query_row("SELECT count(*) FROM buckets", [], |row| {
                row.get::<_, i64>(0)
            })?;
            Ok((w, r))
        };
        let (w, r, fresh) = match attempt() {
            Ok((w, r)) => (w, r, !existed),
            Err(e) => {
                tracing::warn!(error = %e, "receipt id index unreadable; rebuilding it from the shards");
                for suffix in ["", "-wal", "-shm"] {
                    let p = PathBuf::from(format!("{}{suffix}", path.display()));
                    if p.exists() {
                        let _ = clankie_runtime::state::move_aside(&p);
                    }
                }
                let (w, r) = attempt().map_err(std::io::Error::other)?;
                (w, r, true)
            }
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok((
            IdIndex {
                write: Mutex::new(w),
                read: Mutex::new(r),
            },
            fresh,
        ))
    }

    /// The sequence number of a sealed receipt.
    pub fn seq(&self, receipt_id: &str) -> Result<Option<u64>, ClankieError> {
        let c = self.read.lock();
        let mut stmt = c
            .prepare_cached("SELECT seq FROM receipts WHERE id = ?1")
            .map_err(failed)?;
        stmt.query_row(params![receipt_id], |r| r.get::<_, i64>(0))
            .optional()
            .map(|s| s.map(|s| s as u64))
            .map_err(failed)
    }

    /// True when every bucket in `ids` is indexed.
    pub fn has_buckets(&self, ids: &[u64]) -> Result<bool, ClankieError> {
        let c = self.read.lock();
        let mut stmt = c
            .prepare_cached("SELECT 1 FROM buckets WHERE id = ?1")
            .map_err(failed)?;
        for id in ids {
            if stmt
                .query_row(params![*id as i64], |_| Ok(()))
                .optional()
                .map_err(failed)?
                .is_none()
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Indexes whole buckets in one synced transaction.
    pub fn add<'a>(
        &self,
        buckets: impl IntoIterator<Item = (u64, Vec<(&'a str, u64)>)>,
    ) -> Result<(), ClankieError> {
        let mut c = self.write.lock();
        let tx = c.transaction().map_err(failed)?;
        {
            let mut ids = tx
                .prepare_cached("INSERT OR REPLACE INTO receipts (id, seq) VALUES (?1, ?2)")
                .map_err(failed)?;
            let mut done = tx
                .prepare_cached("INSERT OR IGNORE INTO buckets (id) VALUES (?1)")
                .map_err(failed)?;
            for (bucket, records) in buckets {
                for (id, seq) in records {
                    ids.execute(params![id, seq as i64]).map_err(failed)?;
                }
                done.execute(params![bucket as i64]).map_err(failed)?;
            }
        }
        tx.commit().map_err(failed)
    }
}
