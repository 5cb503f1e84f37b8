//! Durable connected-call receipts, stored as the seed stores them.
//!
//! `connected-calls.json` is a small manifest naming immutable,
//! content-addressed buckets in `connected-calls.json.d/` (each file is named
//! by the SHA-256 of its bytes). Receipts go to buckets by sequence number, so
//! a change rewrites one small bucket and the manifest, never the whole ledger.
//! Old buckets are named through segments ([`disk`]), so the manifest stays
//! small, and only the buckets a hot path needs stay in memory: the one
//! filling up and any holding a call in flight. Sealed buckets are found
//! through a derived SQLite id index ([`index`]) and read on demand.
//!
//! Invariants:
//! - A bucket is synced (and its directory synced) before the manifest that
//!   names it is committed; the manifest is committed by atomic rename.
//! - A missing or changed committed bucket puts the store in a refused state:
//!   dispatch is refused with `receipt_store_corrupt` and nothing is rewritten
//!   or deleted, so the evidence stays in place. A commit checks the files it
//!   replaces; the whole history is checked after every start and hourly
//!   ([`verify`]).
//! - A record is durable before its call is dispatched; a record still
//!   `dispatched` when the store opens becomes `uncertain` (the call may have
//!   applied), and is never dispatched again.
//! - An outcome is recorded at once and made durable by the next commit,
//!   after the reply: a crash in between leaves the receipt `dispatched`,
//!   which reopens as `uncertain`, never as a second dispatch.
//! - Retention trims only settled bodies; uncertain records and the identity
//!   of every receipt (the tombstone) are kept forever, so an old receipt id
//!   can never dispatch again.
//! - Concurrent changes share one commit (group commit): one writer task
//!   drains every queued change and pays for one round of syncs.

mod commit;
mod disk;
mod index;
mod journal;
mod open;
mod verify;

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use clankie_runtime::{ClankieError, ErrorCode};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

pub use disk::BUCKET_SIZE;
use disk::{BucketRef, Counters, SegmentRef, corrupt};

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

    fn is_uncertain(&self) -> bool {
        self.status == Status::Settled && self.outcome == Some(Outcome::Uncertain)
    }
}

/// A bucket held in memory: the one filling up, or one with a call in
/// flight.
#[derive(Debug, Default)]
struct Hot {
    records: Vec<Record>,
    committed: Option<BucketRef>,
    dirty: bool,
    trimmed: bool,
}

impl Hot {
    fn in_flight(&self) -> bool {
        self.records.iter().any(|r| r.status == Status::Dispatched)
    }
}

#[derive(Debug, Default)]
struct StoreState {
    hot: BTreeMap<u64, Hot>,
    /// Receipt id → (bucket, position) for hot records only.
    index: HashMap<String, (u64, usize)>,
    /// Sealed buckets that still hold bodies: named by the manifest, read
    /// from disk on demand.
    cold: BTreeMap<u64, BucketRef>,
    /// Segments naming sealed, trimmed buckets, oldest first.
    segments: Vec<SegmentRef>,
    /// The bucket references of the last segment while it has room.
    open_segment: Vec<BucketRef>,
    /// The newest uncertain receipts of sealed buckets, newest first (at
    /// most [`MAX_STALLED`]): status names them without reading history.
    sealed_uncertain: Vec<Record>,
    next_seq: u64,
    /// Set when a committed shard is missing or changed: dispatch is refused.
    problem: Option<String>,
    manifest_dirty: bool,
    /// Receipts changed since the last commit, for the journal's next
    /// entry (a checkpoint takes them all).
    changed: Vec<String>,
    /// A checkpoint failed: the next commit must be one.
    checkpoint_owed: bool,
    /// The journal generation the manifest's buckets include.
    journal_covered: u64,
}

/// Counts for status and doctor.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub records: u64,
    pub uncertain: u64,
    pub pending: u64,
    pub trimmed: u64,
    pub buckets: u32,
    /// Buckets held in memory.
    pub hot_buckets: u32,
    pub commits: u64,
    pub synced_writes: u64,
    /// `fsync`/`fdatasync` calls since the store opened.
    pub syncs: u64,
    /// Bytes written since the store opened.
    pub bytes_written: u64,
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

/// A change for the writer. `done` is set when the caller waits for
/// durability; an outcome (`None`) rides the next commit.
struct Change {
    done: Option<oneshot::Sender<Result<(), ClankieError>>>,
    /// A stop: after the commit, checkpoint too, so a clean stop leaves the
    /// buckets current and nothing to replay.
    checkpoint: bool,
}

struct Inner {
    dir: PathBuf,
    retained_bodies: u64,
    state: Mutex<StoreState>,
    index: index::IdIndex,
    counters: Counters,
    /// Held while a file is replaced or checked, so a history check never
    /// reads a file a commit is superseding.
    io: Mutex<()>,
    /// The journal (none until opened, or after a failed append: then
    /// every commit is a checkpoint) and the generation last checkpointed.
    journal: Mutex<JournalState>,
    opened_at: std::time::SystemTime,
}

#[derive(Default)]
struct JournalState {
    file: Option<journal::Journal>,
    covered: u64,
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

impl ReceiptStore {
    /// Refuses when the store cannot guarantee receipts.
    pub fn health(&self) -> Result<(), ClankieError> {
        match &lock(&self.inner.state).problem {
            Some(p) => Err(corrupt(p)),
            None => Ok(()),
        }
    }

    /// Reads one receipt (from memory, or from its sealed bucket on disk).
    pub fn get(&self, receipt_id: &str) -> Option<Record> {
        match self.inner.find(receipt_id) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(reason = e.code.as_str(), "receipt read failed");
                None
            }
        }
    }

    /// Records a call as dispatched and waits until that is durable. If the
    /// id already exists, returns the existing record and writes nothing.
    pub async fn begin(&self, mut record: Record) -> Result<Begin, ClankieError> {
        // Hot records are checked under the lock; a sealed one can only be
        // an old id, found in the index outside it.
        if let Some(r) = self.inner.find(&record.receipt_id)? {
            return Ok(Begin::Existing(Box::new(r)));
        }
        {
            let mut st = lock(&self.inner.state);
            if let Some(p) = &st.problem {
                return Err(corrupt(p));
            }
            // A concurrent begin of the same id won the race.
            if let Some(&(b, i)) = st.index.get(&record.receipt_id)
                && let Some(r) = st.hot.get(&b).and_then(|b| b.records.get(i))
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

    /// Records an outcome now; the next commit makes it durable, without
    /// anyone waiting for it. Until then a crash leaves the receipt
    /// `dispatched`, which reopens as `uncertain`.
    pub fn settle(
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
                .hot
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
            st.changed.push(copy.receipt_id.clone());
            copy
        };
        // A stopped writer is reported by the next begin; this outcome is
        // already visible to readers.
        let _ = self.tx.send(Change {
            done: None,
            checkpoint: false,
        });
        Ok(record)
    }

    /// Waits until every change recorded so far is durable (shutdown).
    pub async fn sync(&self) -> Result<(), ClankieError> {
        self.flush().await
    }

    /// Makes everything durable and checkpoints it (a clean stop).
    pub async fn close(&self) -> Result<(), ClankieError> {
        self.send_waiting(true).await
    }

    async fn flush(&self) -> Result<(), ClankieError> {
        self.send_waiting(false).await
    }

    async fn send_waiting(&self, checkpoint: bool) -> Result<(), ClankieError> {
        let (done, rx) = oneshot::channel();
        self.tx
            .send(Change {
                done: Some(done),
                checkpoint,
            })
            .map_err(|_| ErrorCode::ReceiptStoreUnavailable.err("the receipt writer stopped"))?;
        rx.await
            .map_err(|_| ErrorCode::ReceiptStoreUnavailable.err("the receipt writer stopped"))?
    }

    /// Counts for status: kept per bucket and segment, so this reads no
    /// history beyond the newest sealed bucket.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        let mut s = Stats {
            commits: c.commits.load(Ordering::Relaxed),
            synced_writes: c.synced_writes.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            bytes_written: c.bytes.load(Ordering::Relaxed),
            ..Stats::default()
        };
        let now = clankie_runtime::now_ms();
        let newest_sealed = {
            let st = lock(&self.inner.state);
            s.problem = st.problem.clone();
            s.hot_buckets = st.hot.len() as u32;
            s.buckets = (st.hot.len() + st.cold.len()) as u32
                + st.segments.iter().map(|g| g.buckets as u32).sum::<u32>();
            for g in &st.segments {
                s.records += g.records;
                s.uncertain += g.uncertain;
                s.trimmed += g.trimmed_records;
            }
            for b in st.cold.values() {
                s.records += b.records;
                s.uncertain += b.uncertain;
                s.trimmed += b.trimmed_records;
            }
            let mut stalled: Vec<&Record> = st.sealed_uncertain.iter().collect();
            for r in st.hot.values().flat_map(|b| b.records.iter()) {
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
            // Buckets hold receipts in sequence order, so the newest are at
            // the end of the newest buckets.
            s.recent = st
                .hot
                .values()
                .rev()
                .flat_map(|b| b.records.iter().rev())
                .take(MAX_RECENT)
                .cloned()
                .collect();
            let mut sealed: Vec<BucketRef> = st
                .cold
                .values()
                .chain(st.open_segment.iter())
                .cloned()
                .collect();
            sealed.sort_by_key(|b| std::cmp::Reverse(b.id));
            sealed
        };
        // The newest sealed buckets fill the rest of the recent list.
        let oldest_hot = s.recent.last().map(|r| r.seq).unwrap_or(u64::MAX);
        for b in newest_sealed {
            if s.recent.len() >= MAX_RECENT {
                break;
            }
            let Ok(file) = disk::read_bucket(&self.inner.dir.join(disk::SHARDS), &b) else {
                break;
            };
            s.recent.extend(
                file.records
                    .into_iter()
                    .rev()
                    .filter(|r| r.seq < oldest_hot)
                    .take(MAX_RECENT - s.recent.len()),
            );
        }
        s
    }
}

impl Inner {
    /// A receipt by id: hot ones from memory, sealed ones through the index.
    fn find(&self, receipt_id: &str) -> Result<Option<Record>, ClankieError> {
        {
            let st = lock(&self.state);
            if let Some(&(b, i)) = st.index.get(receipt_id) {
                return Ok(st.hot.get(&b).and_then(|b| b.records.get(i)).cloned());
            }
        }
        let Some(seq) = self.index.seq(receipt_id)? else {
            return Ok(None);
        };
        let bucket = seq / BUCKET_SIZE;
        let shards = self.dir.join(disk::SHARDS);
        // A commit may trim the bucket (new file, old one removed) between
        // finding its reference and reading it: look again once.
        let mut last = None;
        for _ in 0..2 {
            let Some(r) = self.sealed_ref(bucket)? else {
                break;
            };
            match disk::read_bucket(&shards, &r) {
                Ok(file) => {
                    return Ok(file
                        .records
                        .into_iter()
                        .find(|r| r.receipt_id == receipt_id));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            ErrorCode::ReceiptStoreUnavailable
                .err("the receipt id index names a bucket the manifest does not")
        }))
    }

    /// The committed reference of a sealed bucket.
    fn sealed_ref(&self, bucket: u64) -> Result<Option<BucketRef>, ClankieError> {
        let candidates: Vec<SegmentRef> = {
            let st = lock(&self.state);
            if let Some(r) = st.cold.get(&bucket) {
                return Ok(Some(r.clone()));
            }
            if let Some(r) = st.open_segment.iter().find(|r| r.id == bucket) {
                return Ok(Some(r.clone()));
            }
            st.segments
                .iter()
                .rev()
                .filter(|g| g.first <= bucket && bucket <= g.last)
                .cloned()
                .collect()
        };
        let shards = self.dir.join(disk::SHARDS);
        for g in candidates {
            let file = disk::read_segment(&shards, &g)?;
            if let Some(r) = file.buckets.into_iter().find(|r| r.id == bucket) {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }
}

fn insert(st: &mut StoreState, record: Record) {
    let b = record.seq / BUCKET_SIZE;
    st.next_seq = st.next_seq.max(record.seq + 1);
    let bucket = st.hot.entry(b).or_default();
    st.index
        .insert(record.receipt_id.clone(), (b, bucket.records.len()));
    st.changed.push(record.receipt_id.clone());
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
    let Some(bucket) = st.hot.get_mut(&b) else {
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

#[cfg(test)]
mod tests;
