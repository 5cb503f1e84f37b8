//! Which database a state folder holds.
//!
//! SQLite opens an empty or missing file as a new, empty database, so a
//! truncated or replaced `tracker.db` would silently start over with every
//! team and issue gone. Each database therefore carries a random identity
//! (a one-row table), and the folder keeps the same identity beside it in
//! `tracker.db.identity`. A database that is missing, empty, foreign or of
//! another identity where one was recorded is refused, never recreated.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::StoreError;

/// The sidecar file beside `tracker.db`.
pub const SIDECAR: &str = "tracker.db.identity";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Sidecar {
    database_id: String,
}

fn unreadable(problem: String) -> StoreError {
    StoreError::Invalid(format!(
        "{problem}; the tracker refuses to start a new database over it (move the files aside only to start over)"
    ))
}

/// The identity the folder recorded, if any.
pub fn recorded(dir: &Path) -> Result<Option<String>, StoreError> {
    use clankie_runtime::state::{Loaded, load_json};
    match load_json::<Sidecar>(&dir.join(SIDECAR)) {
        Loaded::Missing => Ok(None),
        Loaded::Ok(s) => Ok(Some(s.database_id)),
        Loaded::Unreadable(e) => Err(unreadable(format!("{SIDECAR} is unreadable ({e})"))),
    }
}

/// Before opening: the file the folder should have is there and not empty.
pub fn check_file(db: &Path, recorded: Option<&str>) -> Result<(), StoreError> {
    match (std::fs::metadata(db), recorded) {
        (Ok(m), _) if m.len() == 0 => Err(unreadable("tracker.db is empty (0 bytes)".into())),
        (Err(e), Some(_)) if e.kind() == std::io::ErrorKind::NotFound => Err(unreadable(format!(
            "tracker.db is missing, but {SIDECAR} records a database here"
        ))),
        _ => Ok(()),
    }
}

/// The identity a database carries, if any.
fn carried(conn: &Connection) -> Result<Option<String>, StoreError> {
    let has_table: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'store_identity'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)?;
    if !has_table {
        return Ok(None);
    }
    Ok(conn
        .query_row("SELECT id FROM store_identity LIMIT 1", [], |r| r.get(0))
        .optional()?)
}

fn has_tables(conn: &Connection) -> Result<bool, StoreError> {
    Ok(conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
        [],
        |r| r.get::<_, i64>(0),
    )? > 0)
}

/// After opening, before any write: the database is the folder's. `fresh`
/// says the file did not exist before this open. Returns true when the
/// identity still has to be given (a new database, after its schema).
pub fn verify(conn: &Connection, recorded: Option<&str>, fresh: bool) -> Result<bool, StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let carried = carried(conn)?;
    match (recorded, carried.as_deref()) {
        (Some(want), Some(have)) if want == have => Ok(false),
        (Some(_), _) => Err(unreadable(
            "tracker.db is not the database this folder recorded (its identity differs)".into(),
        )),
        // No sidecar: a new folder, or one from before identities.
        (None, Some(_)) => Ok(false),
        (None, None) if fresh => Ok(true),
        (None, None) if version > 0 => Ok(true),
        (None, None) if !has_tables(conn)? => Err(unreadable(
            "tracker.db holds no tables but was not created here".into(),
        )),
        (None, None) => Err(unreadable(
            "tracker.db is not a clankie tracker database".into(),
        )),
    }
}

/// Gives a database its identity (if it has none) and records it beside
/// the database.
pub fn seal(conn: &Connection, dir: &Path) -> Result<(), StoreError> {
    let id = match carried(conn)? {
        Some(id) => id,
        None => {
            let id = uuid::Uuid::new_v4().simple().to_string();
            conn.execute_batch("CREATE TABLE IF NOT EXISTS store_identity (id TEXT NOT NULL)")?;
            conn.execute("INSERT INTO store_identity (id) VALUES (?1)", [&id])?;
            id
        }
    };
    clankie_runtime::state::save_json(&dir.join(SIDECAR), &Sidecar { database_id: id })
        .map_err(|e| StoreError::Invalid(format!("{SIDECAR}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::*;

    fn problem(dir: &Path) -> String {
        match Store::open(dir) {
            Ok(_) => panic!("opened"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_new_folder_is_sealed_and_reopens() {
        let dir = tempfile::tempdir().expect("dir");
        drop(Store::open(dir.path()).expect("new"));
        assert!(recorded(dir.path()).expect("sidecar").is_some());
        drop(Store::open(dir.path()).expect("reopen"));
    }

    #[test]
    fn an_empty_database_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().expect("dir");
        drop(Store::open(dir.path()).expect("new"));
        let db = dir.path().join("tracker.db");
        for f in ["tracker.db-wal", "tracker.db-shm"] {
            let _ = std::fs::remove_file(dir.path().join(f));
        }
        std::fs::write(&db, b"").expect("truncate");
        assert!(
            problem(dir.path()).contains("empty"),
            "{}",
            problem(dir.path())
        );
        assert_eq!(
            std::fs::metadata(&db).expect("db").len(),
            0,
            "not recreated"
        );
        // With no sidecar either, an empty file is still not a new database.
        std::fs::remove_file(dir.path().join(SIDECAR)).expect("rm");
        assert!(problem(dir.path()).contains("empty"));
    }

    #[test]
    fn a_missing_foreign_or_other_database_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        drop(Store::open(dir.path()).expect("new"));
        let db = dir.path().join("tracker.db");
        // Another tracker's database copied over this one.
        let other = tempfile::tempdir().expect("other");
        drop(Store::open(other.path()).expect("other"));
        std::fs::copy(other.path().join("tracker.db"), &db).expect("copy");
        assert!(problem(dir.path()).contains("identity differs"));
        // A database of some other program.
        std::fs::remove_file(&db).expect("rm");
        {
            let c = Connection::open(&db).expect("foreign");
            c.execute_batch("CREATE TABLE notes (t TEXT)")
                .expect("table");
        }
        std::fs::remove_file(dir.path().join(SIDECAR)).expect("rm sidecar");
        assert!(problem(dir.path()).contains("not a clankie tracker database"));
        let c = Connection::open(&db).expect("foreign");
        let version: i64 = c
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, 0, "nothing was migrated into it");
        // Gone, where a database was recorded.
        std::fs::remove_file(&db).expect("rm");
        std::fs::write(dir.path().join(SIDECAR), br#"{"databaseId":"0123"}"#).expect("sidecar");
        assert!(problem(dir.path()).contains("missing"));
        assert!(!db.exists(), "not recreated");
    }

    #[test]
    fn a_database_from_before_identities_is_adopted() {
        let dir = tempfile::tempdir().expect("dir");
        drop(Store::open(dir.path()).expect("new"));
        {
            let c = Connection::open(dir.path().join("tracker.db")).expect("db");
            c.execute_batch("DROP TABLE store_identity").expect("drop");
        }
        std::fs::remove_file(dir.path().join(SIDECAR)).expect("rm");
        drop(Store::open(dir.path()).expect("adopted"));
        assert!(recorded(dir.path()).expect("sidecar").is_some());
    }
}
