use super::disk::{MANIFEST, Manifest, SHARDS};
use super::*;

/// Leaves the store in `dir` no journal (its path leads nowhere), so
/// every commit is a checkpoint.
fn without_journal(dir: &std::path::Path) {
    std::os::unix::fs::symlink(dir.join("absent/journal"), dir.join(journal::JOURNAL))
        .expect("symlink");
}

fn rec(id: &str) -> Record {
    Record {
        receipt_id: id.into(),
        seq: 0,
        fleet: "f".into(),
        principal: "fleet:f:pane:unverified".into(),
        owner: String::new(),
        name: "time_get_current_time".into(),
        account: "time".into(),
        account_generation: 1,
        arguments_sha256: "00".into(),
        background: false,
        status: Status::Dispatched,
        outcome: None,
        result: None,
        detail: None,
        dispatched_at_ms: 1,
        settled_at_ms: None,
        trimmed: false,
        journal: String::new(),
    }
}

#[tokio::test]
async fn receipts_survive_reopen_and_pending_become_uncertain() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        assert!(matches!(
            s.begin(rec("a")).await.expect("a"),
            Begin::Durable
        ));
        assert!(matches!(
            s.begin(rec("b")).await.expect("b"),
            Begin::Durable
        ));
        s.settle("a", Outcome::Ok, Some(serde_json::json!({"x": 1})), None)
            .expect("settle");
        s.sync().await.expect("durable");
        assert!(matches!(
            s.begin(rec("a")).await.expect("dup"),
            Begin::Existing(_)
        ));
    }
    let s = ReceiptStore::open(dir.path(), 1000).expect("reopen");
    s.health().expect("healthy");
    let a = s.get("a").expect("a");
    assert_eq!(a.visible_outcome(), Outcome::Ok);
    assert_eq!(a.result, Some(serde_json::json!({"x": 1})));
    let b = s.get("b").expect("b");
    assert_eq!(b.visible_outcome(), Outcome::Uncertain);
    assert_eq!(b.status, Status::Settled);
}

#[tokio::test]
async fn a_begin_that_cannot_be_made_durable_is_forgotten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shards = dir.path().join(SHARDS);
    without_journal(dir.path());
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        // A file where the shard folder was: every write fails, as on a
        // full disk.
        std::fs::remove_dir(&shards).expect("rmdir");
        std::fs::write(&shards, b"").expect("block");
        let e = s.begin(rec("lost-call")).await.err().expect("refused");
        assert_eq!(e.code, ErrorCode::ReceiptStoreUnavailable);
        assert!(s.get("lost-call").is_none());
        std::fs::remove_file(&shards).expect("unblock");
        std::fs::create_dir(&shards).expect("mkdir");
        assert!(matches!(
            s.begin(rec("kept-call")).await,
            Ok(Begin::Durable)
        ));
        assert_eq!(s.stats().pending, 1);
    }
    let s = ReceiptStore::open(dir.path(), 1000).expect("reopen");
    assert!(s.get("lost-call").is_none(), "never written as dispatched");
    assert!(s.get("kept-call").is_some());
}

#[tokio::test]
async fn changed_shard_refuses_and_is_left_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        s.begin(rec("a")).await.expect("a");
    }
    // Reopening checkpoints what the journal held into a bucket.
    drop(ReceiptStore::open(dir.path(), 1000).expect("checkpoint"));
    let shard = std::fs::read_dir(dir.path().join(SHARDS))
        .expect("ls")
        .filter_map(|e| e.ok())
        .next()
        .expect("one shard")
        .path();
    std::fs::write(&shard, b"{\"bucket\":0,\"records\":[]}").expect("tamper");
    let s = ReceiptStore::open(dir.path(), 1000).expect("reopen");
    let err = s.health().expect_err("refused");
    assert_eq!(err.code, ErrorCode::ReceiptStoreCorrupt);
    let err = match s.begin(rec("b")).await {
        Err(e) => e,
        Ok(_) => panic!("begin must refuse"),
    };
    assert_eq!(err.code, ErrorCode::ReceiptStoreCorrupt);
    assert_eq!(
        std::fs::read(&shard).expect("still there"),
        b"{\"bucket\":0,\"records\":[]}"
    );
}

#[tokio::test]
async fn retention_trims_old_settled_bodies_keeps_uncertain_and_identity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = ReceiptStore::open(dir.path(), 10).expect("open");
    for i in 0..(BUCKET_SIZE + 20) {
        let id = format!("r{i}");
        s.begin(rec(&id)).await.expect("begin");
        let outcome = if i == 3 {
            Outcome::Uncertain
        } else {
            Outcome::Ok
        };
        s.settle(&id, outcome, Some(serde_json::json!(i)), None)
            .expect("settle");
    }
    s.sync().await.expect("durable");
    let old = s.get("r1").expect("tombstone kept");
    assert!(old.trimmed);
    assert_eq!(old.result, None);
    let unc = s.get("r3").expect("uncertain kept");
    assert!(!unc.trimmed);
    assert_eq!(unc.result, Some(serde_json::json!(3)));
    let newest = s.get(&format!("r{}", BUCKET_SIZE + 19)).expect("new");
    assert!(!newest.trimmed);
    assert!(matches!(
        s.begin(rec("r1")).await.expect("dup"),
        Begin::Existing(_)
    ));
}

#[tokio::test]
async fn concurrent_calls_share_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = ReceiptStore::open(dir.path(), 1000).expect("open");
    let mut tasks = Vec::new();
    for i in 0..200 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            s.begin(rec(&format!("c{i}"))).await.map(|_| ())
        }));
    }
    for t in tasks {
        t.await.expect("join").expect("begin");
    }
    let stats = s.stats();
    assert_eq!(stats.records, 200);
    assert!(
        stats.commits < 200,
        "commits {} should be grouped",
        stats.commits
    );
}

#[tokio::test]
async fn legacy_array_journal_migrates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut r = rec("old");
    r.status = Status::Settled;
    r.outcome = Some(Outcome::Ok);
    std::fs::write(
        dir.path().join(MANIFEST),
        serde_json::to_vec(&vec![r]).expect("json"),
    )
    .expect("write");
    let s = ReceiptStore::open(dir.path(), 1000).expect("open");
    assert_eq!(s.get("old").expect("kept").visible_outcome(), Outcome::Ok);
    let m: Manifest =
        serde_json::from_slice(&std::fs::read(dir.path().join(MANIFEST)).expect("manifest"))
            .expect("new format");
    assert_eq!(m.buckets.len(), 1);
}

/// Fills `n` receipts, settled `ok` except every 100th, left uncertain.
async fn fill(s: &ReceiptStore, n: u64) {
    for i in 0..n {
        let id = format!("h{i}");
        s.begin(rec(&id)).await.expect("begin");
        let outcome = if i % 100 == 7 {
            Outcome::Uncertain
        } else {
            Outcome::Ok
        };
        s.settle(&id, outcome, Some(serde_json::json!({"n": i})), None)
            .expect("settle");
    }
    s.sync().await.expect("durable");
}

#[tokio::test]
async fn sealed_history_leaves_memory_and_is_still_found_after_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = BUCKET_SIZE * 6 + 10;
    {
        let s = ReceiptStore::open(dir.path(), 300).expect("open");
        fill(&s, n).await;
        let st = s.stats();
        assert_eq!(st.records, n);
        assert_eq!(
            st.hot_buckets, 1,
            "only the bucket filling up stays in memory"
        );
        assert_eq!(st.uncertain, (0..n).filter(|i| i % 100 == 7).count() as u64);
    }
    let s = ReceiptStore::open(dir.path(), 300).expect("reopen");
    s.health().expect("healthy");
    let st = s.stats();
    assert_eq!(st.records, n);
    assert_eq!(st.hot_buckets, 1);
    assert_eq!(st.stalled.len(), MAX_STALLED.min(st.uncertain as usize));
    assert_eq!(st.stalled[0].receipt_id, "h1507", "newest uncertain first");
    assert_eq!(st.recent.len(), MAX_RECENT);
    assert_eq!(st.recent[0].receipt_id, format!("h{}", n - 1));
    // A trimmed old receipt (read from a segment) keeps its identity.
    let old = s.get("h5").expect("old receipt");
    assert!(old.trimmed);
    assert_eq!(old.visible_outcome(), Outcome::Ok);
    // A sealed receipt within retention keeps its body.
    let kept = s.get(&format!("h{}", n - 20)).expect("recent receipt");
    assert_eq!(kept.result, Some(serde_json::json!({"n": n - 20})));
    for id in ["h0", "h5", "h700", "h1500"] {
        assert!(
            matches!(s.begin(rec(id)).await.expect("dup"), Begin::Existing(_)),
            "{id} must never dispatch again"
        );
    }
    let m: Manifest =
        serde_json::from_slice(&std::fs::read(dir.path().join(MANIFEST)).expect("manifest"))
            .expect("manifest");
    assert!(
        !m.segments.is_empty(),
        "old buckets are named through a segment"
    );
    assert!(
        m.buckets.len() <= 4,
        "the manifest names {} buckets",
        m.buckets.len()
    );
}

#[tokio::test]
async fn a_lost_id_index_is_rebuilt_and_old_ids_still_refuse_dispatch() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 10).expect("open");
        fill(&s, BUCKET_SIZE * 2 + 3).await;
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("{}{suffix}", index::INDEX)));
    }
    let s = ReceiptStore::open(dir.path(), 10).expect("reopen");
    s.health().expect("healthy");
    assert!(matches!(
        s.begin(rec("h3")).await.expect("dup"),
        Begin::Existing(_)
    ));
    // An unreadable index is moved aside, not trusted.
    drop(s);
    std::fs::write(dir.path().join(index::INDEX), b"not a database").expect("garble");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("{}{suffix}", index::INDEX)));
    }
    let s = ReceiptStore::open(dir.path(), 10).expect("reopen");
    s.health().expect("healthy");
    assert!(matches!(
        s.begin(rec("h300")).await.expect("dup"),
        Begin::Existing(_)
    ));
}

#[tokio::test]
async fn a_changed_sealed_bucket_is_found_by_the_history_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 10).expect("open");
        fill(&s, BUCKET_SIZE * 2 + 3).await;
    }
    let m: Manifest =
        serde_json::from_slice(&std::fs::read(dir.path().join(MANIFEST)).expect("manifest"))
            .expect("manifest");
    let seg = disk::read_segment(&dir.path().join(SHARDS), &m.segments[0]).expect("segment");
    let victim = dir.path().join(SHARDS).join(&seg.buckets[0].file);
    let mut bytes = std::fs::read(&victim).expect("read");
    bytes.extend_from_slice(b" ");
    std::fs::write(&victim, &bytes).expect("tamper");
    let s = ReceiptStore::open(dir.path(), 10).expect("reopen");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while s.health().is_ok() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        s.health().expect_err("refused").code,
        ErrorCode::ReceiptStoreCorrupt
    );
    assert_eq!(std::fs::read(&victim).expect("left in place"), bytes);
}

#[tokio::test]
async fn an_old_unnamed_shard_is_removed_after_start_and_a_new_one_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        fill(&s, 3).await;
    }
    let shards = dir.path().join(SHARDS);
    let orphan = shards.join(format!("{}.json", "0".repeat(64)));
    std::fs::write(&orphan, b"{}").expect("orphan");
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&orphan)
        .expect("open")
        .set_modified(past)
        .expect("age it");
    let young = shards.join(format!("{}.json", "1".repeat(64)));
    std::fs::write(&young, b"{}").expect("young");
    let s = ReceiptStore::open(dir.path(), 1000).expect("reopen");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while orphan.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!orphan.exists(), "a crash leftover is removed");
    assert!(
        young.exists(),
        "a file as new as the start may be a commit in flight"
    );
    s.health().expect("healthy");
    assert_eq!(s.get("h1").expect("kept").visible_outcome(), Outcome::Ok);
}

#[tokio::test]
async fn a_commit_is_one_journal_write_and_one_sync() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = ReceiptStore::open(dir.path(), 1000).expect("open");
    fill(&s, 4).await;
    let before = s.stats();
    s.begin(rec("one")).await.expect("begin");
    let after = s.stats();
    assert_eq!(after.commits - before.commits, 1);
    // One pwrite into the preallocated journal, one fdatasync.
    assert_eq!(after.syncs - before.syncs, 1);
    assert_eq!(after.synced_writes - before.synced_writes, 1);
}

#[tokio::test]
async fn a_checkpoint_costs_one_synced_write_per_bucket_plus_the_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    without_journal(dir.path());
    let s = ReceiptStore::open(dir.path(), 1000).expect("open");
    fill(&s, 4).await;
    let before = s.stats();
    s.begin(rec("one")).await.expect("begin");
    let after = s.stats();
    assert_eq!(after.commits - before.commits, 1);
    // The bucket (write + fdatasync), its directory, the manifest (fsync,
    // then its directory).
    assert_eq!(after.syncs - before.syncs, 4);
    assert_eq!(after.synced_writes - before.synced_writes, 2);
}

/// The bucket files in the shard folder.
fn buckets_on_disk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join(SHARDS))
        .expect("ls")
        .filter_map(|e| e.ok())
        .count()
}

#[tokio::test]
async fn receipts_only_in_the_journal_survive_a_stop_before_any_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        s.begin(rec("a")).await.expect("a");
        s.settle("a", Outcome::Ok, Some(serde_json::json!({"x": 1})), None)
            .expect("settle");
        s.sync().await.expect("durable");
        s.begin(rec("b")).await.expect("b");
        assert_eq!(buckets_on_disk(dir.path()), 0, "nothing checkpointed yet");
    }
    let s = ReceiptStore::open(dir.path(), 1000).expect("reopen");
    s.health().expect("healthy");
    let a = s.get("a").expect("a from the journal");
    assert_eq!(a.visible_outcome(), Outcome::Ok);
    assert_eq!(a.result, Some(serde_json::json!({"x": 1})));
    assert_eq!(s.get("b").expect("b").visible_outcome(), Outcome::Uncertain);
    assert_eq!(
        buckets_on_disk(dir.path()),
        1,
        "the reopen checkpointed them"
    );
}

#[tokio::test]
async fn a_torn_last_journal_entry_is_ignored_and_earlier_ones_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        s.begin(rec("kept")).await.expect("kept");
        s.begin(rec("torn")).await.expect("torn");
    }
    // Damage the last entry, as a crash inside its write would.
    let path = dir.path().join(journal::JOURNAL);
    let mut bytes = std::fs::read(&path).expect("journal");
    let at = bytes
        .windows(4)
        .rposition(|w| w == b"torn")
        .expect("the entry");
    bytes[at] = b'X';
    std::fs::write(&path, &bytes).expect("tear");
    let s = ReceiptStore::open(dir.path(), 1000).expect("reopen");
    s.health().expect("healthy");
    assert!(s.get("kept").is_some());
    assert!(
        s.get("torn").is_none(),
        "a torn entry was never acknowledged"
    );
}

#[tokio::test]
async fn a_checkpointed_generation_is_never_replayed_over_later_outcomes() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        s.begin(rec("a")).await.expect("a");
    }
    {
        // Reopened: a turns uncertain, checkpointed; then a new outcome for
        // b is journaled under the next generation.
        let s = ReceiptStore::open(dir.path(), 1000).expect("reopen");
        s.begin(rec("b")).await.expect("b");
        s.settle("b", Outcome::Ok, None, None).expect("settle");
        s.sync().await.expect("durable");
    }
    let s = ReceiptStore::open(dir.path(), 1000).expect("again");
    assert_eq!(s.get("a").expect("a").visible_outcome(), Outcome::Uncertain);
    assert_eq!(s.get("b").expect("b").visible_outcome(), Outcome::Ok);
    let m: Manifest =
        serde_json::from_slice(&std::fs::read(dir.path().join(MANIFEST)).expect("manifest"))
            .expect("parse");
    assert!(
        m.journal >= 2,
        "each reopen checkpointed a newer generation"
    );
}

#[tokio::test]
async fn settled_receipts_replayed_from_the_journal_survive_the_next_reopen_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        s.begin(rec("a")).await.expect("a");
        s.settle("a", Outcome::Ok, None, None).expect("settle");
        s.sync().await.expect("durable");
    }
    // Nothing was in flight, yet the replay must be checkpointed before the
    // journal moves to its next generation.
    drop(ReceiptStore::open(dir.path(), 1000).expect("reopen"));
    let s = ReceiptStore::open(dir.path(), 1000).expect("again");
    assert_eq!(s.get("a").expect("a").visible_outcome(), Outcome::Ok);
}

#[tokio::test]
async fn a_failed_journal_append_checkpoints_and_the_journal_is_never_replayed_over_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = ReceiptStore::open(dir.path(), 1000).expect("open");
        // The journal holds a as dispatched; its outcome is only in memory.
        s.begin(rec("a")).await.expect("a");
        s.settle("a", Outcome::Ok, None, None).expect("settle");
        // The disk starts failing the journal's writes.
        {
            let mut j = s.inner.journal.lock();
            let generation = j.file.as_ref().expect("journal").generation;
            j.file = Some(journal::Journal::failing(dir.path(), generation).expect("reopen"));
        }
        let before = s.stats().synced_writes;
        assert!(matches!(s.begin(rec("b")).await, Ok(Begin::Durable)));
        assert!(
            s.stats().synced_writes - before >= 2,
            "the begin was made durable by a checkpoint instead"
        );
    }
    let s = ReceiptStore::open(dir.path(), 1000).expect("reopen");
    s.health().expect("healthy");
    assert_eq!(
        s.get("a").expect("a").visible_outcome(),
        Outcome::Ok,
        "the journal's older entry for a was not replayed over the checkpoint"
    );
    assert!(s.get("b").is_some());
}
