//! The writer: group commits, sealing and trimming.
//!
//! A commit that only adds or settles receipts is one journal append: one
//! `pwrite` and one `fdatasync` (`journal.rs`). A checkpoint, when a bucket
//! seals or trims or the journal is full, costs per bucket it changes one
//! `write` and one `fdatasync`; then one directory sync; then the manifest
//! (temporary file, fsync, rename, directory sync) and the journal's next
//! generation. Sealing adds one synced index transaction and trimming one
//! rewritten bucket and segment, each once per [`BUCKET_SIZE`] receipts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clankie_runtime::{ClankieError, ErrorCode};
use tokio::sync::mpsc;

use super::disk::{
    self, BUCKET_SIZE, BucketFile, BucketRef, Manifest, SEGMENT_BUCKETS, SHARDS, SegmentFile,
    SegmentRef, corrupt, io_error,
};
use super::{Change, Inner, MAX_STALLED, Record, lock};

/// How long outcomes alone wait for a begin to share their commit.
const SETTLE_WINDOW: Duration = Duration::from_millis(5);
/// How soon a commit that failed (a full disk) is tried again while
/// outcomes wait for it.
const RETRY_AFTER: Duration = Duration::from_secs(1);

pub(super) async fn writer(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<Change>) {
    let mut owed = false;
    loop {
        let first = if owed {
            match tokio::time::timeout(RETRY_AFTER, rx.recv()).await {
                Ok(Some(c)) => Some(c),
                Ok(None) => return,
                Err(_) => None,
            }
        } else {
            match rx.recv().await {
                Some(c) => Some(c),
                None => return,
            }
        };
        let mut batch: Vec<Change> = first.into_iter().collect();
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        if !batch.is_empty() && batch.iter().all(|c| c.done.is_none()) {
            // Outcomes only: nobody waits for them, and the next call's
            // begin can carry them in its commit.
            if let Ok(Some(c)) = tokio::time::timeout(SETTLE_WINDOW, rx.recv()).await {
                batch.push(c);
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
            }
        }
        let waited = batch.iter().any(|c| c.done.is_some());
        let stop = batch.iter().any(|c| c.checkpoint);
        let started = std::time::Instant::now();
        let inner2 = inner.clone();
        let result = tokio::task::spawn_blocking(move || {
            inner2
                .commit()
                .and_then(|()| if stop { inner2.checkpoint() } else { Ok(()) })
        })
        .await
        .unwrap_or_else(|_| Err(ErrorCode::Internal.err("the receipt commit panicked")));
        crate::metrics::commit(
            if waited { "begin" } else { "settle" },
            result.is_ok(),
            started,
        );
        owed = matches!(&result, Err(e) if e.code != ErrorCode::ReceiptStoreCorrupt);
        if owed && !waited {
            tracing::warn!(
                reason = result.as_ref().err().map_or("", |e| e.code.as_str()),
                "receipt outcomes not yet durable; retrying"
            );
        }
        for change in batch {
            if let Some(done) = change.done {
                let _ = done.send(result.clone());
            }
        }
    }
}

/// A changed hot bucket, encoded under the lock.
struct Write {
    id: u64,
    bytes: Vec<u8>,
    counts: Counts,
    trimmed: bool,
    sealed: bool,
    replaces: Option<BucketRef>,
}

#[derive(Clone, Copy, Default)]
struct Counts {
    records: u64,
    uncertain: u64,
    trimmed: u64,
}

fn counts(records: &[Record]) -> Counts {
    Counts {
        records: records.len() as u64,
        uncertain: records.iter().filter(|r| r.is_uncertain()).count() as u64,
        trimmed: records.iter().filter(|r| r.trimmed).count() as u64,
    }
}

/// A hot bucket leaving memory.
struct Sealing {
    bucket: u64,
    /// (receipt id, seq) for the index.
    ids: Vec<(String, u64)>,
    /// Its uncertain records, kept for status.
    uncertain: Vec<Record>,
}

/// Everything a commit needs, taken under the lock.
struct Plan {
    writes: Vec<Write>,
    /// Hot buckets that leave memory: their ids for the index, and their
    /// uncertain records for status.
    sealing: Vec<Sealing>,
    /// Hot buckets unchanged on disk whose reference becomes sealed.
    sealing_unchanged: Vec<BucketRef>,
    /// Cold buckets past the retention horizon, to rewrite trimmed.
    trimming: Vec<BucketRef>,
    unchanged_hot: Vec<BucketRef>,
    cold: BTreeMap<u64, BucketRef>,
    segments: Vec<SegmentRef>,
    open_segment: Vec<BucketRef>,
    next_seq: u64,
}

fn trim_records(records: &mut [Record]) {
    for r in records.iter_mut() {
        if r.is_settled_body() && !r.trimmed {
            r.result = None;
            r.trimmed = true;
        }
    }
}

impl Inner {
    /// Makes every change so far durable: a journal append when that is
    /// all it takes, else a checkpoint. Runs on the writer (and once at
    /// open) only.
    pub(super) fn commit(&self) -> Result<(), ClankieError> {
        if self.journal_commit()? {
            return Ok(());
        }
        self.checkpoint()
    }

    /// Appends the changed receipts to the journal. False when a
    /// checkpoint is needed instead: no journal, a bucket to seal or trim,
    /// no room, a failed checkpoint owed, or a failed append (which also
    /// closes the journal; the checkpoint covers what it held).
    fn journal_commit(&self) -> Result<bool, ClankieError> {
        let mut j = self.journal.lock();
        let Some(journal) = j.file.as_mut() else {
            return Ok(false);
        };
        let (payload, ids) = {
            let mut st = lock(&self.state);
            if let Some(p) = &st.problem {
                return Err(corrupt(p));
            }
            if st.changed.is_empty() && !st.checkpoint_owed {
                return Ok(true);
            }
            if self.needs_checkpoint(&st) {
                return Ok(false);
            }
            let mut ids = std::mem::take(&mut st.changed);
            ids.sort_unstable();
            ids.dedup();
            let mut records: Vec<Record> = ids
                .iter()
                .filter_map(|id| {
                    let &(b, i) = st.index.get(id)?;
                    st.hot.get(&b)?.records.get(i).cloned()
                })
                .collect();
            // In receipt order, so a replay files new receipts in their
            // buckets in the order they began.
            records.sort_by_key(|r| r.seq);
            let payload = disk::encode(&records)?;
            if !journal.fits(payload.len()) {
                st.changed = ids;
                return Ok(false);
            }
            (payload, ids)
        };
        match journal.append(&payload) {
            Ok(n) => {
                self.counters.journaled(n);
                Ok(true)
            }
            Err(e) => {
                tracing::warn!(error = %e, "receipt journal append failed; checkpointing instead");
                // The checkpoint that follows includes every entry of this
                // generation, so it must say so: replaying them over it
                // would turn later outcomes back into "dispatched".
                j.covered = journal.generation;
                j.file = None;
                lock(&self.state).changed.extend(ids);
                Ok(false)
            }
        }
    }

    /// A bucket seals (full, nothing in flight) or trims, or a failed
    /// checkpoint is owed: only a checkpoint does that.
    fn needs_checkpoint(&self, st: &super::StoreState) -> bool {
        let horizon = st.next_seq.saturating_sub(self.retained_bodies);
        st.checkpoint_owed
            || st
                .cold
                .values()
                .any(|r| (r.id + 1) * BUCKET_SIZE <= horizon)
            || st
                .hot
                .iter()
                .any(|(&id, b)| !b.in_flight() && (id + 1) * BUCKET_SIZE <= st.next_seq)
    }

    /// Writes every changed bucket, then the manifest, then starts the
    /// journal's next generation.
    pub(super) fn checkpoint(&self) -> Result<(), ClankieError> {
        let Some(plan) = self.plan()? else {
            return Ok(());
        };
        let result = self.write_out(plan);
        let mut st = lock(&self.state);
        match &result {
            Ok(()) => st.checkpoint_owed = false,
            Err(e) if e.code == ErrorCode::ReceiptStoreCorrupt => {
                st.problem.get_or_insert_with(|| e.message.clone());
            }
            Err(_) => {
                // Keep everything dirty so the next commit retries it.
                for b in st.hot.values_mut() {
                    b.dirty = true;
                }
                st.manifest_dirty = true;
                st.checkpoint_owed = true;
            }
        }
        result
    }

    fn plan(&self) -> Result<Option<Plan>, ClankieError> {
        let mut st = lock(&self.state);
        if let Some(p) = &st.problem {
            return Err(corrupt(p));
        }
        if !st.manifest_dirty {
            return Ok(None);
        }
        let horizon = st.next_seq.saturating_sub(self.retained_bodies);
        let next_seq = st.next_seq;
        let mut plan = Plan {
            writes: Vec::new(),
            sealing: Vec::new(),
            sealing_unchanged: Vec::new(),
            trimming: st
                .cold
                .values()
                .filter(|r| (r.id + 1) * BUCKET_SIZE <= horizon)
                .cloned()
                .collect(),
            unchanged_hot: Vec::new(),
            cold: st.cold.clone(),
            segments: st.segments.clone(),
            open_segment: st.open_segment.clone(),
            next_seq,
        };
        for (&id, bucket) in st.hot.iter_mut() {
            let in_flight = bucket.in_flight();
            if !bucket.trimmed && !in_flight && (id + 1) * BUCKET_SIZE <= horizon {
                trim_records(&mut bucket.records);
                bucket.trimmed = true;
                bucket.dirty = true;
            }
            // Full (no later receipt lands here) and nothing in flight.
            let sealed = !in_flight && (id + 1) * BUCKET_SIZE <= next_seq;
            if sealed && (bucket.dirty || bucket.committed.is_some()) {
                plan.sealing.push(Sealing {
                    bucket: id,
                    ids: bucket
                        .records
                        .iter()
                        .map(|r| (r.receipt_id.clone(), r.seq))
                        .collect(),
                    uncertain: bucket
                        .records
                        .iter()
                        .filter(|r| r.is_uncertain())
                        .cloned()
                        .collect(),
                });
            }
            if bucket.dirty {
                plan.writes.push(Write {
                    id,
                    bytes: disk::encode(&BucketFile {
                        bucket: id,
                        records: bucket.records.clone(),
                    })?,
                    counts: counts(&bucket.records),
                    trimmed: bucket.trimmed,
                    sealed,
                    replaces: bucket.committed.clone(),
                });
                bucket.dirty = false;
            } else if let Some(c) = &bucket.committed {
                if sealed {
                    plan.sealing_unchanged.push(BucketRef {
                        sealed: true,
                        ..c.clone()
                    });
                } else {
                    plan.unchanged_hot.push(c.clone());
                }
            }
        }
        st.manifest_dirty = false;
        st.changed.clear();
        Ok(Some(plan))
    }

    fn write_out(&self, plan: Plan) -> Result<(), ClankieError> {
        let shards = self.dir.join(SHARDS);
        let _io = self.io.lock();
        let mut wrote = false;
        let mut superseded: Vec<String> = Vec::new();
        // Buckets the manifest names directly (hot, and sealed with bodies),
        // and sealed trimmed ones bound for a segment.
        let mut named: BTreeMap<u64, BucketRef> = BTreeMap::new();
        let mut to_segment: Vec<BucketRef> = Vec::new();
        for r in plan.unchanged_hot {
            named.insert(r.id, r);
        }
        for r in plan.sealing_unchanged {
            if r.trimmed {
                to_segment.push(r);
            } else {
                named.insert(r.id, r);
            }
        }
        for w in plan.writes {
            let (file, sha256) = disk::content_name(&w.bytes);
            if let Some(old) = &w.replaces {
                // Only the file being replaced is checked here; the rest of
                // the history is checked after start and hourly.
                disk::check_size(&shards, &old.file, old.bytes)?;
                if old.file != file {
                    superseded.push(old.file.clone());
                }
            }
            // The same name means the same bytes, already committed.
            if w.replaces.as_ref().is_none_or(|old| old.file != file) {
                self.counters
                    .write_new(&shards.join(&file), &w.bytes)
                    .map_err(io_error)?;
                wrote = true;
            }
            let r = BucketRef {
                id: w.id,
                file,
                sha256,
                bytes: w.bytes.len() as u64,
                records: w.counts.records,
                trimmed: w.trimmed,
                sealed: w.sealed,
                uncertain: w.counts.uncertain,
                trimmed_records: w.counts.trimmed,
            };
            if r.sealed && r.trimmed {
                to_segment.push(r);
            } else {
                named.insert(r.id, r);
            }
        }
        let mut cold = plan.cold;
        for old in plan.trimming {
            let mut file = disk::read_bucket(&shards, &old)?;
            trim_records(&mut file.records);
            let bytes = disk::encode(&file)?;
            let (name, sha256) = disk::content_name(&bytes);
            if name != old.file {
                self.counters
                    .write_new(&shards.join(&name), &bytes)
                    .map_err(io_error)?;
                wrote = true;
                superseded.push(old.file.clone());
            }
            let c = counts(&file.records);
            cold.remove(&old.id);
            to_segment.push(BucketRef {
                id: old.id,
                file: name,
                sha256,
                bytes: bytes.len() as u64,
                records: c.records,
                trimmed: true,
                sealed: true,
                uncertain: c.uncertain,
                trimmed_records: c.trimmed,
            });
        }
        // Sealed buckets are indexed (and the index synced) before the
        // manifest that takes them out of memory commits.
        if !plan.sealing.is_empty() {
            self.index.add(plan.sealing.iter().map(|s| {
                (
                    s.bucket,
                    s.ids
                        .iter()
                        .map(|(i, s)| (i.as_str(), *s))
                        .collect::<Vec<_>>(),
                )
            }))?;
            self.counters.index_sync();
        }
        let mut segments = plan.segments;
        let mut open_segment = plan.open_segment;
        if !to_segment.is_empty() {
            if !open_segment.is_empty()
                && let Some(old) = segments.pop()
            {
                superseded.push(old.file);
            }
            to_segment.sort_by_key(|r| r.id);
            for r in to_segment {
                open_segment.push(r);
                if open_segment.len() == SEGMENT_BUCKETS {
                    segments.push(self.write_segment(&shards, segments.len(), &open_segment)?);
                    open_segment.clear();
                }
            }
            if !open_segment.is_empty() {
                segments.push(self.write_segment(&shards, segments.len(), &open_segment)?);
            }
            wrote = true;
        }
        if wrote {
            self.counters.sync_dir(&shards).map_err(io_error)?;
        }
        for (&id, r) in &cold {
            named.entry(id).or_insert_with(|| r.clone());
        }
        // Every journal entry so far was appended before this plan was
        // taken (one writer), so these buckets include its generation.
        let covering = {
            let j = self.journal.lock();
            j.file.as_ref().map_or(j.covered, |f| f.generation)
        };
        let manifest = Manifest {
            version: disk::MANIFEST_VERSION,
            next_seq: plan.next_seq,
            bucket_size: BUCKET_SIZE,
            segments: segments.clone(),
            buckets: named.values().cloned().collect(),
            journal: covering,
        };
        self.counters
            .replace(&self.dir.join(disk::MANIFEST), &disk::encode(&manifest)?)
            .map_err(io_error)?;
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        {
            let mut j = self.journal.lock();
            j.covered = covering;
            if let Some(f) = j.file.as_mut()
                && let Err(e) = f.reset(covering + 1)
            {
                tracing::warn!(error = %e, "receipt journal not reset; commits checkpoint from now");
                j.file = None;
            } else if j.file.is_some() {
                self.counters.synced();
            }
        }
        {
            let mut st = lock(&self.state);
            for s in plan.sealing {
                if st.hot.remove(&s.bucket).is_some() {
                    for (rid, _) in s.ids {
                        st.index.remove(&rid);
                    }
                }
                st.sealed_uncertain.extend(s.uncertain);
            }
            st.sealed_uncertain
                .sort_by_key(|r| std::cmp::Reverse(r.seq));
            st.sealed_uncertain.truncate(MAX_STALLED);
            for (id, r) in &named {
                if let Some(b) = st.hot.get_mut(id) {
                    b.committed = Some(r.clone());
                }
            }
            st.cold = named
                .into_values()
                .filter(|r| r.sealed && !st.hot.contains_key(&r.id))
                .map(|r| (r.id, r))
                .collect();
            st.segments = segments;
            st.open_segment = open_segment;
        }
        for old in superseded {
            let _ = std::fs::remove_file(shards.join(old));
        }
        Ok(())
    }

    fn write_segment(
        &self,
        shards: &std::path::Path,
        ordinal: usize,
        buckets: &[BucketRef],
    ) -> Result<SegmentRef, ClankieError> {
        let bytes = disk::encode(&SegmentFile {
            segment: ordinal as u64,
            buckets: buckets.to_vec(),
        })?;
        let (file, sha256) = disk::content_name(&bytes);
        self.counters
            .write_new(&shards.join(&file), &bytes)
            .map_err(io_error)?;
        Ok(disk::segment_ref(
            ordinal as u64,
            buckets,
            file,
            sha256,
            bytes.len() as u64,
        ))
    }
}
