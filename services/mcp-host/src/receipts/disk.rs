//! The receipt store's files and the one way each is written.
//!
//! - `connected-calls.json`: the manifest, replaced by atomic rename. It
//!   names the buckets that are still changing or still hold bodies, and the
//!   segments that name every older bucket, so it stays small however long
//!   the history grows.
//! - `connected-calls.journal`: what changed since the manifest, appended
//!   per commit (`journal.rs`).
//! - `connected-calls.json.d/SHA256.json`: immutable, content-addressed
//!   buckets (up to [`BUCKET_SIZE`] receipts) and segments (up to
//!   [`SEGMENT_BUCKETS`] sealed, trimmed bucket references).
//!
//! A content-addressed file is written straight to its name: until a
//! committed manifest names it, nobody reads it, and a crash leaves an
//! orphan that the next start removes. A file already committed under the
//! same name already holds these bytes, so it is never written again.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use clankie_runtime::ClankieError;
use clankie_runtime::ErrorCode;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Record;

/// Receipts per bucket.
pub const BUCKET_SIZE: u64 = 256;
/// Sealed, trimmed buckets named by one segment.
pub const SEGMENT_BUCKETS: usize = 256;
pub(super) const MANIFEST: &str = "connected-calls.json";
pub(super) const SHARDS: &str = "connected-calls.json.d";
pub(super) const MANIFEST_VERSION: u32 = 3;

/// One committed bucket, as the manifest or a segment names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BucketRef {
    pub id: u64,
    pub file: String,
    pub sha256: String,
    pub bytes: u64,
    pub records: u64,
    /// Settled bodies are trimmed: the bucket never changes again.
    #[serde(default)]
    pub trimmed: bool,
    /// Full, with nothing in flight, and its ids in the derived index: the
    /// bucket is read from disk on demand, not held in memory.
    #[serde(default)]
    pub sealed: bool,
    #[serde(default)]
    pub uncertain: u64,
    #[serde(default)]
    pub trimmed_records: u64,
}

/// One committed segment: the references of sealed, trimmed buckets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SegmentRef {
    pub file: String,
    pub sha256: String,
    pub bytes: u64,
    /// The lowest and highest bucket id named (ids need not be contiguous).
    pub first: u64,
    pub last: u64,
    pub buckets: u64,
    pub records: u64,
    pub uncertain: u64,
    pub trimmed_records: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Manifest {
    pub version: u32,
    pub next_seq: u64,
    pub bucket_size: u64,
    #[serde(default)]
    pub segments: Vec<SegmentRef>,
    pub buckets: Vec<BucketRef>,
    /// The newest journal generation these buckets include
    /// (`journal.rs`); 0 before the journal.
    #[serde(default)]
    pub journal: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct BucketFile {
    pub bucket: u64,
    pub records: Vec<Record>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SegmentFile {
    pub segment: u64,
    pub buckets: Vec<BucketRef>,
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub(super) fn content_name(bytes: &[u8]) -> (String, String) {
    let sha = sha256_hex(bytes);
    (format!("{sha}.json"), sha)
}

/// The refused-state error: nothing is rewritten or deleted after it.
pub(super) fn corrupt(problem: &str) -> ClankieError {
    ErrorCode::ReceiptStoreCorrupt.err(format!(
        "{problem}; dispatch is refused and the receipt files are left in place for inspection (never delete them to retry a call)"
    ))
}

pub(super) fn io_error(e: std::io::Error) -> ClankieError {
    ErrorCode::ReceiptStoreUnavailable.err(format!("receipt write: {e}"))
}

pub(super) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ClankieError> {
    serde_json::to_vec(value).map_err(|e| ErrorCode::Internal.err(format!("receipt encode: {e}")))
}

/// What the store's writes cost, counted where they happen.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub commits: AtomicU64,
    pub synced_writes: AtomicU64,
    /// `fsync`/`fdatasync` calls, files and directories.
    pub syncs: AtomicU64,
    /// Bytes handed to `write`.
    pub bytes: AtomicU64,
}

impl Counters {
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Writes a new content-addressed file and makes its bytes durable; the
    /// directory entry is synced once per commit by [`Counters::sync_dir`].
    /// Callers never pass a committed name, so a failed write (a full
    /// disk) removes what it left.
    pub fn write_new(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let written = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut f| {
                f.write_all(bytes)?;
                f.sync_data()
            });
        if let Err(e) = written {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Self::add(&self.synced_writes, 1);
        Self::add(&self.syncs, 1);
        Self::add(&self.bytes, bytes.len() as u64);
        Ok(())
    }

    pub fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        clankie_runtime::state::sync_dir(dir)?;
        Self::add(&self.syncs, 1);
        Ok(())
    }

    /// The manifest: temporary file, fsync, rename, directory fsync.
    pub fn replace(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        clankie_runtime::state::atomic_write(path, bytes)?;
        Self::add(&self.synced_writes, 1);
        Self::add(&self.syncs, 2);
        Self::add(&self.bytes, bytes.len() as u64);
        Ok(())
    }

    /// One journal append: one write, one `fdatasync`, one commit.
    pub fn journaled(&self, bytes: usize) {
        Self::add(&self.commits, 1);
        Self::add(&self.synced_writes, 1);
        Self::add(&self.syncs, 1);
        Self::add(&self.bytes, bytes as u64);
    }

    /// One more sync (the journal's header at a checkpoint).
    pub fn synced(&self) {
        Self::add(&self.syncs, 1);
    }

    pub fn index_sync(&self) {
        Self::add(&self.syncs, 1);
    }
}

/// Reads a committed file and checks it is the bytes its reference names.
pub(super) fn read_verified(
    shards: &Path,
    file: &str,
    sha256: &str,
) -> Result<Vec<u8>, ClankieError> {
    match std::fs::read(shards.join(file)) {
        Ok(b) if sha256_hex(&b) == sha256 => Ok(b),
        Ok(_) => Err(corrupt(&format!(
            "committed receipt shard {file} was changed"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(corrupt(&format!(
            "committed receipt shard {file} is missing"
        ))),
        Err(e) => Err(ErrorCode::ReceiptStoreUnavailable.err(format!(
            "committed receipt shard {file} cannot be read: {e}"
        ))),
    }
}

/// A cheap check that a committed file is still there at its size.
pub(super) fn check_size(shards: &Path, file: &str, bytes: u64) -> Result<(), ClankieError> {
    match std::fs::metadata(shards.join(file)) {
        Ok(m) if m.len() == bytes => Ok(()),
        Ok(_) => Err(corrupt(&format!(
            "committed receipt shard {file} was changed"
        ))),
        Err(_) => Err(corrupt(&format!(
            "committed receipt shard {file} is missing"
        ))),
    }
}

pub(super) fn read_bucket(shards: &Path, r: &BucketRef) -> Result<BucketFile, ClankieError> {
    let bytes = read_verified(shards, &r.file, &r.sha256)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        corrupt(&format!(
            "committed receipt shard {} cannot be parsed: {e}",
            r.file
        ))
    })
}

pub(super) fn read_segment(shards: &Path, r: &SegmentRef) -> Result<SegmentFile, ClankieError> {
    let bytes = read_verified(shards, &r.file, &r.sha256)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        corrupt(&format!(
            "committed receipt segment {} cannot be parsed: {e}",
            r.file
        ))
    })
}

/// The reference a segment file gets for the bucket references it holds.
pub(super) fn segment_ref(
    id: u64,
    buckets: &[BucketRef],
    file: String,
    sha256: String,
    bytes: u64,
) -> SegmentRef {
    SegmentRef {
        file,
        sha256,
        bytes,
        first: buckets.iter().map(|b| b.id).min().unwrap_or(id),
        last: buckets.iter().map(|b| b.id).max().unwrap_or(id),
        buckets: buckets.len() as u64,
        records: buckets.iter().map(|b| b.records).sum(),
        uncertain: buckets.iter().map(|b| b.uncertain).sum(),
        trimmed_records: buckets.iter().map(|b| b.trimmed_records).sum(),
    }
}
