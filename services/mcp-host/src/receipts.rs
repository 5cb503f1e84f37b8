//! Durable connected-call receipts, stored as the seed stores them.
//!
//! `connected-calls.json` is a small manifest naming immutable,
//! content-addressed buckets in `connected-calls.json.d/` (each file is named
//! by the SHA-256 of its bytes). Receipts go to buckets by sequence number, so
//! a change rewrites one small bucket and the manifest, never the whole ledger.
//!
//! Invariants:
//! - A bucket is synced (and its directory synced) before the manifest that
//!   names it is committed; the manifest is committed by atomic rename.
//! - A missing or changed committed bucket puts the store in a refused state:
//!   dispatch is refused with `receipt_store_corrupt` and nothing is rewritten
//!   or deleted, so the evidence stays in place.
//! - A record is durable before its call is dispatched; a record still
//!   `dispatched` when the store opens becomes `uncertain` (the call may have
//!   applied), and is never dispatched again.
//! - Retention trims only settled bodies; uncertain records and the identity
//!   of every receipt (the tombstone) are kept forever, so an old receipt id
//!   can never dispatch again.
//! - Concurrent changes share one commit (group commit): one writer task
//!   drains every queued change and pays for one round of syncs.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clankie_runtime::state::{self, sync_dir};
use clankie_runtime::{ClankieError, ErrorCode};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

/// Receipts per bucket.
pub const BUCKET_SIZE: u64 = 256;
const MANIFEST: &str = "connected-calls.json";
const SHARDS: &str = "connected-calls.json.d";

/// Where a receipt's call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Durable and dispatched (or about to be); no answer recorded yet.
    Dispatched,
    /// An outcome is recorded.
    Settled,
}

/// What a call did, as far as anyone can know: the fleet's one word for it.
pub use clankie_types::fleet::Outcome;

/// One receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub receipt_id: String,
    pub seq: u64,
    pub fleet: String,
    /// The audit principal (`fleet:ID:pane:PANE`).
    pub principal: String,
    /// Whose receipt this is ([`clankie_runtime::principal::owner_key`]):
    /// only that principal reads it back. Empty on records written before
    /// owners were kept; those answer the same audit principal.
    #[serde(default)]
    pub owner: String,
    /// The qualified tool name.
    pub name: String,
    pub account: String,
    pub account_generation: u64,
    pub arguments_sha256: String,
    #[serde(default)]
    pub background: bool,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub dispatched_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at_ms: Option<i64>,
    #[serde(default)]
    pub trimmed: bool,
    /// A work-item write's journal key: the owner's gesture, its source
    /// item, the saved tracker and the account scope, hashed. A repeated
    /// request id returns the original only under the same key. Empty for
    /// every other call.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub journal: String,
}

impl Record {
    /// True when `owner` (with its audit principal) is who made the call.
    pub fn belongs_to(&self, owner: &str, principal: &str) -> bool {
        if self.owner.is_empty() {
            self.principal == principal
        } else {
            self.owner == owner
        }
    }

    /// The outcome a caller sees: a call with no answer yet is uncertain.
    pub fn visible_outcome(&self) -> Outcome {
        match (self.status, self.outcome) {
            (Status::Settled, Some(o)) => o,
            _ => Outcome::Uncertain,
        }
    }

    fn is_settled_body(&self) -> bool {
        self.status == Status::Settled && matches!(self.outcome, Some(Outcome::Ok | Outcome::Error))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BucketRef {
    id: u64,
    file: String,
    sha256: String,
    bytes: u64,
    records: u64,
    #[serde(default)]
    trimmed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    version: u32,
    next_seq: u64,
    bucket_size: u64,
    buckets: Vec<BucketRef>,
}

#[derive(Debug, Serialize, Deserialize)]
struct BucketFile {
    bucket: u64,
    records: Vec<Record>,
}

#[derive(Debug, Default)]
struct Bucket {
    records: Vec<Record>,
    committed: Option<BucketRef>,
    dirty: bool,
    trimmed: bool,
}

#[derive(Debug, Default)]
struct StoreState {
    buckets: BTreeMap<u64, Bucket>,
    index: HashMap<String, (u64, usize)>,
    next_seq: u64,
    /// Set when a committed shard is missing or changed: dispatch is refused.
    problem: Option<String>,
    manifest_dirty: bool,
}

/// Counts for status and doctor.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub records: u64,
    pub uncertain: u64,
    pub pending: u64,
    pub trimmed: u64,
    pub buckets: u32,
    pub commits: u64,
    pub synced_writes: u64,
    pub problem: Option<String>,
    /// Calls dispatched longer than [`STALLED_AFTER_MS`] without an answer,
    /// or settled uncertain: newest first, at most [`MAX_STALLED`].
    pub stalled: Vec<Record>,
    /// The newest calls, settled or not: newest first, at most
    /// [`MAX_RECENT`].
    pub recent: Vec<Record>,
}

/// A dispatched call older than this (the whole request budget) is stalled.
pub const STALLED_AFTER_MS: i64 = 30_000;
/// The most stalled calls a status names.
pub const MAX_STALLED: usize = 64;
/// The most recent calls a status names.
pub const MAX_RECENT: usize = 20;

/// What `begin` found.
pub enum Begin {
    /// The record is durable; dispatch may proceed.
    Durable,
    /// A receipt with this id already exists; nothing may be dispatched.
    Existing(Box<Record>),
}

struct Change {
    done: oneshot::Sender<Result<(), ClankieError>>,
}

struct Inner {
    dir: PathBuf,
    retained_bodies: u64,
    state: Mutex<StoreState>,
    commits: AtomicU64,
    synced_writes: AtomicU64,
}

/// The receipt store; cheap to clone.
#[derive(Clone)]
pub struct ReceiptStore {
    inner: Arc<Inner>,
    tx: mpsc::UnboundedSender<Change>,
}

fn lock(m: &Mutex<StoreState>) -> parking_lot::MutexGuard<'_, StoreState> {
    m.lock()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn corrupt(problem: &str) -> ClankieError {
    ErrorCode::ReceiptStoreCorrupt.err(format!(
        "{problem}; dispatch is refused and the receipt files are left in place for inspection (never delete them to retry a call)"
    ))
}

impl ReceiptStore {
    /// Opens (or creates) the store in `dir`. Never fails on bad files: a
    /// damaged store opens in the refused state instead.
    pub fn open(dir: &Path, retained_bodies: usize) -> std::io::Result<Self> {
        state::private_dir(dir)?;
        state::private_dir(&dir.join(SHARDS))?;
        let mut st = StoreState::default();
        let mut migrated = false;
        match std::fs::read(dir.join(MANIFEST)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let leftovers = std::fs::read_dir(dir.join(SHARDS))?
                    .filter_map(|e| e.ok())
                    .any(|e| !e.file_name().to_string_lossy().starts_with('.'));
                if leftovers {
                    st.problem = Some("the receipt manifest is missing but shards exist".into());
                }
            }
            Err(e) => st.problem = Some(format!("the receipt manifest cannot be read: {e}")),
            Ok(bytes) => {
                if let Ok(legacy) = serde_json::from_slice::<Vec<Record>>(&bytes) {
                    // A legacy array journal: migrate on the next save.
                    for r in legacy {
                        insert(&mut st, r);
                    }
                    migrated = true;
                } else {
                    match serde_json::from_slice::<Manifest>(&bytes) {
                        Err(e) => {
                            st.problem = Some(format!("the receipt manifest cannot be parsed: {e}"))
                        }
                        Ok(m) => load_buckets(dir, &m, &mut st),
                    }
                }
            }
        }
        if st.problem.is_none() {
            // Calls in flight when the last process died may have applied.
            let mut changed = migrated;
            for bucket in st.buckets.values_mut() {
                for r in bucket.records.iter_mut() {
                    if r.status == Status::Dispatched {
                        r.status = Status::Settled;
                        r.outcome = Some(Outcome::Uncertain);
                        r.detail = Some(
                            "the host stopped before the call answered; it may have applied".into(),
                        );
                        r.settled_at_ms = Some(clankie_runtime::now_ms());
                        bucket.dirty = true;
                        changed = true;
                    }
                }
                if migrated {
                    bucket.dirty = true;
                }
            }
            st.manifest_dirty = changed;
            remove_orphans(dir, &st);
        }
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            retained_bodies: retained_bodies as u64,
            state: Mutex::new(st),
            commits: AtomicU64::new(0),
            synced_writes: AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let store = ReceiptStore { inner, tx };
        let needs_commit = lock(&store.inner.state).manifest_dirty;
        if needs_commit && let Err(e) = store.inner.commit() {
            tracing::error!(reason = e.code.as_str(), "receipt startup commit failed");
        }
        tokio::spawn(writer(store.inner.clone(), rx));
        Ok(store)
    }

    /// Refuses when the store cannot guarantee receipts.
    pub fn health(&self) -> Result<(), ClankieError> {
        match &lock(&self.inner.state).problem {
            Some(p) => Err(corrupt(p)),
            None => Ok(()),
        }
    }

    /// Reads one receipt.
    pub fn get(&self, receipt_id: &str) -> Option<Record> {
        let st = lock(&self.inner.state);
        let (b, i) = *st.index.get(receipt_id)?;
        st.buckets.get(&b)?.records.get(i).cloned()
    }

    /// Records a call as dispatched and waits until that is durable. If the
    /// id already exists, returns the existing record and writes nothing.
    pub async fn begin(&self, mut record: Record) -> Result<Begin, ClankieError> {
        {
            let mut st = lock(&self.inner.state);
            if let Some(p) = &st.problem {
                return Err(corrupt(p));
            }
            if let Some(&(b, i)) = st.index.get(&record.receipt_id)
                && let Some(r) = st.buckets.get(&b).and_then(|b| b.records.get(i))
            {
                return Ok(Begin::Existing(Box::new(r.clone())));
            }
            record.seq = st.next_seq;
            record.status = Status::Dispatched;
            insert(&mut st, record.clone());
        }
        if let Err(e) = self.flush().await {
            // Nothing will be dispatched: the record must not be written
            // later as "dispatched", or it would read "may have applied"
            // forever.
            forget(&mut lock(&self.inner.state), &record.receipt_id);
            return Err(e);
        }
        Ok(Begin::Durable)
    }

    /// Records an outcome and waits until it is durable.
    pub async fn settle(
        &self,
        receipt_id: &str,
        outcome: Outcome,
        result: Option<serde_json::Value>,
        detail: Option<String>,
    ) -> Result<Record, ClankieError> {
        let record = {
            let mut st = lock(&self.inner.state);
            let &(b, i) = st
                .index
                .get(receipt_id)
                .ok_or_else(|| ErrorCode::ReceiptNotFound.err("no such receipt"))?;
            let bucket = st
                .buckets
                .get_mut(&b)
                .ok_or_else(|| ErrorCode::Internal.err("receipt index points at no bucket"))?;
            let r = &mut bucket.records[i];
            r.status = Status::Settled;
            r.outcome = Some(outcome);
            r.result = result;
            r.detail = detail;
            r.settled_at_ms = Some(clankie_runtime::now_ms());
            let copy = r.clone();
            bucket.dirty = true;
            st.manifest_dirty = true;
            copy
        };
        self.flush().await?;
        Ok(record)
    }

    async fn flush(&self) -> Result<(), ClankieError> {
        let (done, rx) = oneshot::channel();
        self.tx
            .send(Change { done })
            .map_err(|_| ErrorCode::ReceiptStoreUnavailable.err("the receipt writer stopped"))?;
        rx.await
            .map_err(|_| ErrorCode::ReceiptStoreUnavailable.err("the receipt writer stopped"))?
    }

    /// Counts for status.
    pub fn stats(&self) -> Stats {
        let st = lock(&self.inner.state);
        let mut s = Stats {
            buckets: st.buckets.len() as u32,
            commits: self.inner.commits.load(Ordering::Relaxed),
            synced_writes: self.inner.synced_writes.load(Ordering::Relaxed),
            problem: st.problem.clone(),
            ..Stats::default()
        };
        let now = clankie_runtime::now_ms();
        let mut stalled: Vec<&Record> = Vec::new();
        for r in st.buckets.values().flat_map(|b| b.records.iter()) {
            s.records += 1;
            let stalled_now = match (r.status, r.outcome) {
                (Status::Dispatched, _) => {
                    s.pending += 1;
                    now - r.dispatched_at_ms > STALLED_AFTER_MS
                }
                (_, Some(Outcome::Uncertain)) => {
                    s.uncertain += 1;
                    true
                }
                _ => false,
            };
            if stalled_now {
                stalled.push(r);
            }
            if r.trimmed {
                s.trimmed += 1;
            }
        }
        stalled.sort_by_key(|r| std::cmp::Reverse(r.seq));
        s.stalled = stalled.into_iter().take(MAX_STALLED).cloned().collect();
        // Buckets hold receipts in sequence order, so the newest are at the
        // end of the last buckets.
        s.recent = st
            .buckets
            .values()
            .rev()
            .flat_map(|b| b.records.iter().rev())
            .take(MAX_RECENT)
            .cloned()
            .collect();
        s
    }
}

fn insert(st: &mut StoreState, record: Record) {
    let b = record.seq / BUCKET_SIZE;
    st.next_seq = st.next_seq.max(record.seq + 1);
    let bucket = st.buckets.entry(b).or_default();
    st.index
        .insert(record.receipt_id.clone(), (b, bucket.records.len()));
    bucket.records.push(record);
    bucket.dirty = true;
    st.manifest_dirty = true;
}

/// Removes a record that never became durable, and re-indexes the records
/// after it in its bucket.
fn forget(st: &mut StoreState, receipt_id: &str) {
    let Some((b, i)) = st.index.remove(receipt_id) else {
        return;
    };
    let Some(bucket) = st.buckets.get_mut(&b) else {
        return;
    };
    if i < bucket.records.len() {
        bucket.records.remove(i);
    }
    for (j, r) in bucket.records.iter().enumerate().skip(i) {
        st.index.insert(r.receipt_id.clone(), (b, j));
    }
    bucket.dirty = true;
    st.manifest_dirty = true;
}

fn load_buckets(dir: &Path, m: &Manifest, st: &mut StoreState) {
    st.next_seq = m.next_seq;
    for bref in &m.buckets {
        let path = dir.join(SHARDS).join(&bref.file);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                st.problem = Some(format!(
                    "committed receipt shard {} is missing ({e})",
                    bref.file
                ));
                return;
            }
        };
        if sha256_hex(&bytes) != bref.sha256 {
            st.problem = Some(format!("committed receipt shard {} was changed", bref.file));
            return;
        }
        let file: BucketFile = match serde_json::from_slice(&bytes) {
            Ok(f) => f,
            Err(e) => {
                st.problem = Some(format!(
                    "committed receipt shard {} cannot be parsed: {e}",
                    bref.file
                ));
                return;
            }
        };
        let mut bucket = Bucket {
            records: Vec::with_capacity(file.records.len()),
            committed: Some(bref.clone()),
            dirty: false,
            trimmed: bref.trimmed,
        };
        for (i, r) in file.records.into_iter().enumerate() {
            st.index.insert(r.receipt_id.clone(), (bref.id, i));
            bucket.records.push(r);
        }
        st.buckets.insert(bref.id, bucket);
    }
}

/// Removes shard files no committed manifest names (left by a crash between
/// a shard write and its manifest commit). Only runs on a healthy store.
fn remove_orphans(dir: &Path, st: &StoreState) {
    let named: HashSet<&str> = st
        .buckets
        .values()
        .filter_map(|b| b.committed.as_ref().map(|c| c.file.as_str()))
        .collect();
    if let Ok(entries) = std::fs::read_dir(dir.join(SHARDS)) {
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().to_string();
            if !named.contains(name.as_str()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

async fn writer(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<Change>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let inner2 = inner.clone();
        let result = tokio::task::spawn_blocking(move || inner2.commit())
            .await
            .unwrap_or_else(|_| Err(ErrorCode::Internal.err("the receipt commit panicked")));
        for change in batch {
            let _ = change.done.send(result.clone());
        }
    }
}

impl Inner {
    /// Writes every dirty bucket, then the manifest. Runs on the writer only.
    fn commit(&self) -> Result<(), ClankieError> {
        let shards = self.dir.join(SHARDS);
        // Snapshot what to write under the lock; do the I/O outside it.
        let (writes, manifest_base) = {
            let mut st = lock(&self.state);
            if let Some(p) = &st.problem {
                return Err(corrupt(p));
            }
            if !st.manifest_dirty {
                return Ok(());
            }
            self.trim(&mut st);
            let mut writes = Vec::new();
            for (&id, bucket) in st.buckets.iter_mut() {
                if bucket.dirty {
                    let bytes = serde_json::to_vec(&BucketFile {
                        bucket: id,
                        records: bucket.records.clone(),
                    })
                    .map_err(|e| ErrorCode::Internal.err(format!("receipt encode: {e}")))?;
                    writes.push((id, bytes, bucket.records.len() as u64, bucket.trimmed));
                    bucket.dirty = false;
                }
            }
            st.manifest_dirty = false;
            let base: Vec<BucketRef> = st
                .buckets
                .values()
                .filter_map(|b| b.committed.clone())
                .collect();
            (writes, (st.next_seq, base))
        };
        let result = self.write_out(&shards, writes, manifest_base);
        if let Err(e) = &result {
            let mut st = lock(&self.state);
            if e.code == ErrorCode::ReceiptStoreCorrupt {
                st.problem.get_or_insert_with(|| e.message.clone());
            } else {
                // Keep everything dirty so the next commit retries it.
                for b in st.buckets.values_mut() {
                    b.dirty = true;
                }
                st.manifest_dirty = true;
            }
        }
        result
    }

    fn write_out(
        &self,
        shards: &Path,
        writes: Vec<(u64, Vec<u8>, u64, bool)>,
        (next_seq, base): (u64, Vec<BucketRef>),
    ) -> Result<(), ClankieError> {
        let io = |e: std::io::Error| {
            ErrorCode::ReceiptStoreUnavailable.err(format!("receipt write: {e}"))
        };
        // Every committed shard must still be what the manifest says before a
        // new manifest is committed over it.
        for bref in &base {
            match std::fs::metadata(shards.join(&bref.file)) {
                Ok(m) if m.len() == bref.bytes => {}
                Ok(_) => {
                    return Err(corrupt(&format!(
                        "committed receipt shard {} was changed",
                        bref.file
                    )));
                }
                Err(_) => {
                    return Err(corrupt(&format!(
                        "committed receipt shard {} is missing",
                        bref.file
                    )));
                }
            }
        }
        let mut refs: BTreeMap<u64, BucketRef> = base.iter().map(|b| (b.id, b.clone())).collect();
        let mut superseded = Vec::new();
        for (id, bytes, records, trimmed) in &writes {
            let sha = sha256_hex(bytes);
            let file = format!("{sha}.json");
            if let Some(old) = refs.get(id) {
                // The shard being replaced must be intact: its bytes are the
                // evidence the new one supersedes.
                match std::fs::read(shards.join(&old.file)) {
                    Ok(b) if sha256_hex(&b) == old.sha256 => {}
                    Ok(_) => {
                        return Err(corrupt(&format!(
                            "committed receipt shard {} was changed",
                            old.file
                        )));
                    }
                    Err(_) => {
                        return Err(corrupt(&format!(
                            "committed receipt shard {} is missing",
                            old.file
                        )));
                    }
                }
                if old.file != file {
                    superseded.push(old.file.clone());
                }
            }
            state::write_synced_tmp(&shards.join(&file), bytes).map_err(io)?;
            self.synced_writes.fetch_add(1, Ordering::Relaxed);
            refs.insert(
                *id,
                BucketRef {
                    id: *id,
                    file,
                    sha256: sha,
                    bytes: bytes.len() as u64,
                    records: *records,
                    trimmed: *trimmed,
                },
            );
        }
        sync_dir(shards).map_err(io)?;
        let manifest = Manifest {
            version: 2,
            next_seq,
            bucket_size: BUCKET_SIZE,
            buckets: refs.values().cloned().collect(),
        };
        let bytes = serde_json::to_vec(&manifest)
            .map_err(|e| ErrorCode::Internal.err(format!("manifest encode: {e}")))?;
        state::atomic_write(&self.dir.join(MANIFEST), &bytes).map_err(io)?;
        self.synced_writes.fetch_add(1, Ordering::Relaxed);
        self.commits.fetch_add(1, Ordering::Relaxed);
        {
            let mut st = lock(&self.state);
            for (id, r) in refs {
                if let Some(b) = st.buckets.get_mut(&id) {
                    b.committed = Some(r);
                }
            }
        }
        for old in superseded {
            let _ = std::fs::remove_file(shards.join(old));
        }
        Ok(())
    }

    /// Trims settled bodies in whole buckets that lie entirely before the
    /// newest `retained_bodies` receipts. Uncertain and pending records keep
    /// everything; every record keeps its identity.
    fn trim(&self, st: &mut StoreState) {
        let horizon = st.next_seq.saturating_sub(self.retained_bodies);
        for (&id, bucket) in st.buckets.iter_mut() {
            if bucket.trimmed || (id + 1) * BUCKET_SIZE > horizon {
                continue;
            }
            if bucket
                .records
                .iter()
                .any(|r| r.status == Status::Dispatched)
            {
                continue;
            }
            for r in bucket.records.iter_mut() {
                if r.is_settled_body() && !r.trimmed {
                    r.result = None;
                    r.trimmed = true;
                }
            }
            bucket.trimmed = true;
            bucket.dirty = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                .await
                .expect("settle");
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
                .await
                .expect("settle");
        }
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
}
