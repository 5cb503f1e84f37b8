//! The store's own tests: writes, receipts, concurrency and migrations.

use super::schema::MIGRATIONS;
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

/// The titles of a team's issues.
fn titles(s: &Store, team: &str) -> Vec<String> {
    s.issues(Some(team), None, 50)
        .expect("list")
        .into_iter()
        .map(|i| i.title)
        .collect()
}

/// One batch job: a `save_issue` for `team`, answering the new identifier.
fn save_job(
    team: &'static str,
    title: &'static str,
) -> BatchJob<'static, Result<String, StoreError>> {
    Box::new(move |s: &mut Store| {
        s.save_issue("w1", new_issue(team, title, None))
            .map(|w| w.value.identifier)
    })
}

#[test]
fn a_batch_commits_its_writes_once_and_a_failed_write_leaves_the_others() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("tracker");
    let mut s = Store::open(&path).expect("open");
    s.create_team("ENG", "Engineering", "lead").expect("team");
    let ran = s.batch(vec![
        save_job("ENG", "one"),
        save_job("NOPE", "refused"),
        save_job("ENG", "two"),
    ]);
    let answers: Vec<_> = ran
        .into_iter()
        .map(|(out, committed)| {
            committed.expect("the batch committed");
            out.ok()
        })
        .collect();
    assert_eq!(
        answers,
        [Some("ENG-1".to_string()), None, Some("ENG-2".to_string())]
    );
    assert!(s.conn.is_autocommit(), "the batch's transaction is closed");
    drop(s);
    // What the batch answered is what a reopened store reads.
    let s = Store::open(&path).expect("reopen");
    let titles = titles(&s, "ENG");
    assert_eq!(titles.len(), 2);
    assert!(titles.contains(&"one".to_string()) && titles.contains(&"two".to_string()));
    assert_eq!(
        s.count_writes("w1").expect("audit"),
        2,
        "the refused write left no audit row"
    );
}

#[test]
fn a_batch_whose_transaction_is_lost_answers_not_committed_and_runs_the_rest_alone() {
    let (_d, mut s) = store();
    s.create_team("ENG", "Engineering", "lead").expect("team");
    let ran = s.batch(vec![
        save_job("ENG", "lost"),
        // As SQLite does on some I/O errors: the whole transaction rolls back.
        Box::new(|s: &mut Store| {
            s.conn.execute_batch("ROLLBACK").expect("rollback");
            Ok(String::new())
        }),
        save_job("ENG", "kept"),
    ]);
    let committed: Vec<_> = ran.iter().map(|(_, c)| c.is_ok()).collect();
    assert_eq!(committed, [false, false, true]);
    assert!(matches!(ran[0].1, Err(StoreError::Uncommitted(_))));
    let titles = titles(&s, "ENG");
    assert_eq!(
        titles,
        ["kept"],
        "only the write that committed itself is there"
    );
}
