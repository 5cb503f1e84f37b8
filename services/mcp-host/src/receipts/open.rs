//! Opening the store: the manifest, the buckets a hot path needs, the id
//! index, and the calls a dead process left in flight.

use std::path::Path;
use std::sync::Arc;

use clankie_runtime::state;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::disk::{self, BucketRef, Manifest, SEGMENT_BUCKETS, SHARDS};
use super::{
    Hot, Inner, JournalState, MAX_STALLED, Outcome, ReceiptStore, Record, Status, StoreState,
    commit, index, insert, journal, lock, verify,
};

impl ReceiptStore {
    /// Opens (or creates) the store in `dir`. Never fails on bad files: a
    /// damaged store opens in the refused state instead. Work at open does
    /// not grow with history: only the manifest, the hot buckets and the
    /// last segment are read; the rest is checked in the background.
    pub fn open(dir: &Path, retained_bodies: usize) -> std::io::Result<Self> {
        state::private_dir(dir)?;
        state::private_dir(&dir.join(SHARDS))?;
        let opened_at = std::time::SystemTime::now();
        let shards = dir.join(SHARDS);
        let mut st = StoreState::default();
        let mut migrated = false;
        match std::fs::read(dir.join(disk::MANIFEST)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let leftovers = std::fs::read_dir(&shards)?
                    .filter_map(|e| e.ok())
                    .any(|e| !e.file_name().to_string_lossy().starts_with('.'));
                if leftovers {
                    st.problem = Some("the receipt manifest is missing but shards exist".into());
                }
                // A new store writes its (empty) manifest before the first
                // journal entry, so a store with entries always has one.
                st.manifest_dirty = true;
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
                        Ok(m) => {
                            if let Err(e) = load(&shards, m, &mut st) {
                                st.problem = Some(e.message);
                            }
                        }
                    }
                }
            }
        }
        if st.problem.is_none() {
            replay_journal(dir, &mut st);
        }
        let (index, fresh) = index::IdIndex::open(dir)?;
        if st.problem.is_none()
            && let Err(e) = catch_up(&shards, &index, &st, fresh)
        {
            st.problem = Some(e.message);
        }
        if st.problem.is_none() {
            settle_abandoned(&mut st, migrated);
            if let Err(e) = newest_uncertain(&shards, &mut st) {
                st.problem = Some(e.message);
            }
        }
        let st_covered = st.journal_covered;
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            retained_bodies: retained_bodies as u64,
            state: Mutex::new(st),
            index,
            counters: Default::default(),
            io: Mutex::new(()),
            journal: Mutex::new(JournalState {
                file: None,
                covered: st_covered,
            }),
            opened_at,
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let store = ReceiptStore { inner, tx };
        let (needs_commit, healthy) = {
            let st = lock(&store.inner.state);
            (st.manifest_dirty, st.problem.is_none())
        };
        // A checkpoint first (it includes what the journal replayed), then
        // the journal's next generation; without either, every commit is a
        // checkpoint.
        let checkpointed = !needs_commit
            || match store.inner.checkpoint() {
                Ok(()) => true,
                Err(e) => {
                    tracing::error!(reason = e.code.as_str(), "receipt startup commit failed");
                    false
                }
            };
        if healthy && checkpointed {
            let next = store.inner.journal.lock().covered + 1;
            match journal::Journal::prepare(dir, next) {
                Ok(j) => store.inner.journal.lock().file = Some(j),
                Err(e) => {
                    tracing::warn!(error = %e, "receipt journal unavailable; every commit checkpoints")
                }
            }
        }
        tokio::spawn(commit::writer(store.inner.clone(), rx));
        tokio::spawn(verify::watch(Arc::downgrade(&store.inner)));
        Ok(store)
    }
}

/// Reads the manifest's hot buckets (verified) and the open segment.
fn load(
    shards: &Path,
    m: Manifest,
    st: &mut StoreState,
) -> Result<(), clankie_runtime::ClankieError> {
    st.next_seq = m.next_seq;
    st.journal_covered = m.journal;
    for bref in m.buckets {
        if bref.sealed {
            st.cold.insert(bref.id, bref);
            continue;
        }
        let file = disk::read_bucket(shards, &bref)?;
        let mut bucket = Hot {
            records: Vec::with_capacity(file.records.len()),
            trimmed: bref.trimmed,
            committed: Some(bref.clone()),
            dirty: false,
        };
        for (i, r) in file.records.into_iter().enumerate() {
            st.index.insert(r.receipt_id.clone(), (bref.id, i));
            bucket.records.push(r);
        }
        st.hot.insert(bref.id, bucket);
    }
    st.segments = m.segments;
    if let Some(last) = st.segments.last()
        && (last.buckets as usize) < SEGMENT_BUCKETS
    {
        st.open_segment = disk::read_segment(shards, last)?.buckets;
    }
    Ok(())
}

/// Applies the journal's entries newer than the manifest's buckets (each
/// record replaces its earlier copy), so the startup checkpoint includes
/// them. A journal that cannot be read, or that names a sealed bucket,
/// refuses the store rather than lose a receipt.
fn replay_journal(dir: &Path, st: &mut StoreState) {
    let (generation, entries) = match journal::read(dir) {
        Ok(Some(read)) => read,
        Ok(None) => return,
        Err(e) => {
            st.problem = Some(format!("the receipt journal cannot be read: {e}"));
            return;
        }
    };
    if generation <= st.journal_covered {
        return;
    }
    for r in entries.into_iter().flatten() {
        if st.cold.contains_key(&(r.seq / disk::BUCKET_SIZE)) {
            st.problem = Some("the receipt journal names a sealed bucket".into());
            return;
        }
        match st.index.get(&r.receipt_id).copied() {
            Some((b, i)) => {
                if let Some(slot) = st.hot.get_mut(&b).and_then(|h| h.records.get_mut(i)) {
                    *slot = r;
                }
                if let Some(h) = st.hot.get_mut(&b) {
                    h.dirty = true;
                }
            }
            None => insert(st, r),
        }
    }
    st.journal_covered = generation;
    st.manifest_dirty = true;
}

/// Makes the id index cover every sealed bucket: all of them when it was
/// (re)created, otherwise the cold buckets the manifest names (a seal is
/// indexed before its manifest commits, so older ones are there).
fn catch_up(
    shards: &Path,
    index: &index::IdIndex,
    st: &StoreState,
    fresh: bool,
) -> Result<(), clankie_runtime::ClankieError> {
    let mut refs: Vec<BucketRef> = st.cold.values().cloned().collect();
    if fresh {
        if !st.segments.is_empty() {
            tracing::warn!("rebuilding the receipt id index from the shards");
        }
        for g in &st.segments {
            refs.extend(disk::read_segment(shards, g)?.buckets);
        }
    } else {
        let ids: Vec<u64> = refs.iter().map(|r| r.id).collect();
        if index.has_buckets(&ids)? {
            return Ok(());
        }
    }
    for chunk in refs.chunks(64) {
        let files = chunk
            .iter()
            .map(|r| disk::read_bucket(shards, r))
            .collect::<Result<Vec<_>, _>>()?;
        index.add(files.iter().map(|f| {
            (
                f.bucket,
                f.records
                    .iter()
                    .map(|r| (r.receipt_id.as_str(), r.seq))
                    .collect(),
            )
        }))?;
    }
    Ok(())
}

/// Calls in flight when the last process died may have applied.
fn settle_abandoned(st: &mut StoreState, migrated: bool) {
    let mut changed = migrated;
    for bucket in st.hot.values_mut() {
        for r in bucket.records.iter_mut() {
            if r.status == Status::Dispatched {
                r.status = Status::Settled;
                r.outcome = Some(Outcome::Uncertain);
                r.detail =
                    Some("the host stopped before the call answered; it may have applied".into());
                r.settled_at_ms = Some(clankie_runtime::now_ms());
                bucket.dirty = true;
                changed = true;
            }
        }
        if migrated {
            bucket.dirty = true;
        }
    }
    st.manifest_dirty |= changed;
}

/// Finds the newest uncertain receipts in sealed buckets, newest first,
/// reading only buckets that hold one.
fn newest_uncertain(
    shards: &Path,
    st: &mut StoreState,
) -> Result<(), clankie_runtime::ClankieError> {
    let mut found: Vec<Record> = Vec::new();
    let mut refs: Vec<BucketRef> = st
        .cold
        .values()
        .chain(st.open_segment.iter())
        .filter(|r| r.uncertain > 0)
        .cloned()
        .collect();
    refs.sort_by_key(|r| std::cmp::Reverse(r.id));
    let closed = st.segments.len() - usize::from(!st.open_segment.is_empty());
    let mut older = st.segments[..closed].iter().rev();
    loop {
        for r in refs.drain(..) {
            if found.len() >= MAX_STALLED {
                break;
            }
            let file = disk::read_bucket(shards, &r)?;
            found.extend(file.records.into_iter().rev().filter(Record::is_uncertain));
        }
        if found.len() >= MAX_STALLED {
            break;
        }
        let Some(g) = older.find(|g| g.uncertain > 0) else {
            break;
        };
        refs = disk::read_segment(shards, g)?
            .buckets
            .into_iter()
            .filter(|r| r.uncertain > 0)
            .collect();
        refs.sort_by_key(|r| std::cmp::Reverse(r.id));
    }
    found.sort_by_key(|r| std::cmp::Reverse(r.seq));
    found.truncate(MAX_STALLED);
    st.sealed_uncertain = found;
    Ok(())
}
