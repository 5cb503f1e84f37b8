//! The receipt journal: one preallocated file that makes a commit one
//! `pwrite` and one `fdatasync`.
//!
//! A commit that only adds or settles receipts appends the changed records
//! to `connected-calls.journal` instead of rewriting their bucket and the
//! manifest. The file is written full of zeros once, so an append lands in
//! blocks that already exist and its sync carries no metadata. The buckets
//! and the manifest are brought up to date by a checkpoint (the full commit
//! in `commit.rs`) when a bucket seals or trims, or the journal is full.
//!
//! Generations keep the two consistent. The header holds the generation
//! being appended; every entry carries it. The manifest names the newest
//! generation its buckets already include (`journal`). A checkpoint writes
//! the manifest first, then moves the header to the next generation, so a
//! crash between the two replays nothing twice. Opening replays the entries
//! of the header's generation when it is newer than the manifest's, up to
//! the first entry that is torn, of another generation, or fails its check.
//!
//! Layout: `MAGIC` (8 bytes), generation (u64 LE); then entries of
//! generation (u64 LE), length (u32 LE), the first 8 bytes of the payload's
//! SHA-256, and the payload (a JSON array of records).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::Record;

pub(super) const JOURNAL: &str = "connected-calls.journal";
/// The journal's fixed size: thousands of commits between checkpoints
/// (a bucket seals every 256 receipts and checkpoints, so it rarely fills).
pub(super) const JOURNAL_BYTES: u64 = 4 << 20;
const MAGIC: &[u8; 8] = b"CKRJNL01";
const HEADER: u64 = 16;
const ENTRY_HEAD: usize = 8 + 4 + 8;

/// The open journal, appended by the store's writer only.
pub(super) struct Journal {
    file: File,
    pub generation: u64,
    end: u64,
}

fn check(payload: &[u8]) -> [u8; 8] {
    let digest = Sha256::digest(payload);
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// The header's generation and the record lists of its entries, oldest
/// first; `None` when there is no journal (or not one of ours). Reads only
/// up to the first entry that does not check, not the zeros after it.
pub(super) fn read(dir: &Path) -> io::Result<Option<(u64, Vec<Vec<Record>>)>> {
    let mut file = match File::open(dir.join(JOURNAL)) {
        Ok(f) => io::BufReader::new(f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut header = [0u8; HEADER as usize];
    match file.read_exact(&mut header) {
        Ok(()) if &header[..8] == MAGIC => {}
        Ok(()) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let generation = u64::from_le_bytes(header[8..].try_into().unwrap_or_default());
    let mut entries = Vec::new();
    let mut head = [0u8; ENTRY_HEAD];
    loop {
        match file.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let entry_gen = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
        let len = u32::from_le_bytes(head[8..12].try_into().unwrap_or_default()) as u64;
        if entry_gen != generation || len == 0 || len > JOURNAL_BYTES {
            break;
        }
        let mut payload = Vec::new();
        (&mut file).take(len).read_to_end(&mut payload)?;
        if payload.len() as u64 != len || check(&payload) != head[12..20] {
            break;
        }
        let Ok(records) = serde_json::from_slice::<Vec<Record>>(&payload) else {
            break;
        };
        entries.push(records);
    }
    Ok(Some((generation, entries)))
}

impl Journal {
    /// Readies the journal for appending under `generation`: created full
    /// of zeros (and synced, with its folder) when absent or short, then its
    /// header set and synced. Entries already there are of an older
    /// generation, so they end any replay.
    pub(super) fn prepare(dir: &Path, generation: u64) -> io::Result<Journal> {
        let path = dir.join(JOURNAL);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)?;
        if file.metadata()?.len() < JOURNAL_BYTES {
            let zeros = vec![0u8; 1 << 20];
            let mut at = 0;
            while at < JOURNAL_BYTES {
                file.write_all_at(&zeros, at)?;
                at += zeros.len() as u64;
            }
            file.sync_all()?;
            clankie_runtime::state::sync_dir(dir)?;
        }
        let mut journal = Journal {
            file,
            generation,
            end: HEADER,
        };
        journal.reset(generation)?;
        Ok(journal)
    }

    /// Starts `generation`: the header is rewritten and synced; appends
    /// begin after it again.
    pub(super) fn reset(&mut self, generation: u64) -> io::Result<()> {
        let mut header = [0u8; HEADER as usize];
        header[..8].copy_from_slice(MAGIC);
        header[8..].copy_from_slice(&generation.to_le_bytes());
        self.file.write_all_at(&header, 0)?;
        self.file.sync_data()?;
        self.generation = generation;
        self.end = HEADER;
        Ok(())
    }

    /// Test hook: this journal reopened read-only, so every append fails
    /// as on a failing disk.
    #[cfg(test)]
    pub(super) fn failing(dir: &Path, generation: u64) -> io::Result<Journal> {
        Ok(Journal {
            file: File::open(dir.join(JOURNAL))?,
            generation,
            end: HEADER,
        })
    }

    /// Whether an entry of `payload_len` bytes still fits.
    pub(super) fn fits(&self, payload_len: usize) -> bool {
        self.end + (ENTRY_HEAD + payload_len) as u64 <= JOURNAL_BYTES
    }

    /// Appends one entry and makes it durable: one `pwrite`, one
    /// `fdatasync`. Returns the bytes written.
    pub(super) fn append(&mut self, payload: &[u8]) -> io::Result<usize> {
        let len = u32::try_from(payload.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "journal entry too large"))?;
        let mut entry = Vec::with_capacity(ENTRY_HEAD + payload.len());
        entry.extend_from_slice(&self.generation.to_le_bytes());
        entry.extend_from_slice(&len.to_le_bytes());
        entry.extend_from_slice(&check(payload));
        entry.extend_from_slice(payload);
        self.file.write_all_at(&entry, self.end)?;
        self.file.sync_data()?;
        self.end += entry.len() as u64;
        Ok(entry.len())
    }
}
