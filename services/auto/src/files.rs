//! The scheduler's files.
//!
//! - `captain/autonomy.json`: the master switch, the owner's saved global
//!   autonomy level and the scheduled self-wakes. Unreadable reads as off.
//! - `auto-rounds/cadence.json`: the next round deadline and, per lead, the
//!   accepted and pending wake fingerprints. Unreadable stops Auto checks
//!   (the fences are never discarded).
//! - `auto-rounds/journal.jsonl`: one fsynced line per round step.
//! - `auto-rounds/cadence.lock`: an exclusive lock; one live scheduler owns
//!   the cadence.
//!
//! Every state write is an atomic rename after fsync.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use clankie_runtime::state::{self, Loaded};
use clankie_types::autonomy::AutonomyLevel;
use clankie_types::leads;
use serde::{Deserialize, Serialize};

/// One scheduled self-wake.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SelfWake {
    pub wake_id: String,
    pub conversation_id: String,
    pub at_ms: i64,
    #[serde(default)]
    pub note: String,
}

/// `captain/autonomy.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AutonomyFile {
    #[serde(default)]
    pub on: bool,
    #[serde(default = "default_level")]
    pub level: AutonomyLevel,
    #[serde(default)]
    pub scheduled: Vec<SelfWake>,
}

fn default_level() -> AutonomyLevel {
    AutonomyLevel::Off
}

/// The switch as read: unreadable reads as off.
#[derive(Debug, Clone)]
pub struct Autonomy {
    pub file: AutonomyFile,
    /// Why the file could not be read, when it could not.
    pub problem: Option<String>,
}

impl Autonomy {
    pub fn on(&self) -> bool {
        self.problem.is_none() && self.file.on
    }
}

pub fn autonomy_path(root: &Path) -> PathBuf {
    root.join("captain").join("autonomy.json")
}

/// Reads the switch fresh.
pub fn read_autonomy(root: &Path) -> Autonomy {
    match state::load_json::<AutonomyFile>(&autonomy_path(root)) {
        Loaded::Missing => Autonomy {
            file: AutonomyFile {
                level: default_level(),
                ..Default::default()
            },
            problem: None,
        },
        Loaded::Ok(mut file) => {
            // Self-wakes saved when the head was `global` still wake it.
            for w in &mut file.scheduled {
                w.conversation_id = leads::head_named(&w.conversation_id).to_string();
            }
            Autonomy {
                file,
                problem: None,
            }
        }
        Loaded::Unreadable(e) => Autonomy {
            file: AutonomyFile {
                level: default_level(),
                ..Default::default()
            },
            problem: Some(e.to_string()),
        },
    }
}

pub fn save_autonomy(root: &Path, file: &AutonomyFile) -> std::io::Result<()> {
    let path = autonomy_path(root);
    if let Some(dir) = path.parent() {
        state::private_dir(dir)?;
    }
    state::save_json(&path, file)
}

/// A delivery reservation: saved before a wake is prepared.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub fingerprint: String,
    pub wake_id: String,
    pub reserved_at_ms: i64,
}

/// One lead's fences.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LeadFence {
    #[serde(default)]
    pub accepted_fingerprint: String,
    #[serde(default)]
    pub accepted_at_ms: i64,
    #[serde(default)]
    pub pending: Option<Pending>,
}

/// `auto-rounds/cadence.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Cadence {
    pub version: u32,
    pub next_deadline_ms: i64,
    #[serde(default)]
    pub leads: BTreeMap<String, LeadFence>,
}

pub fn rounds_dir(root: &Path) -> PathBuf {
    root.join("auto-rounds")
}

pub fn cadence_path(root: &Path) -> PathBuf {
    rounds_dir(root).join("cadence.json")
}

pub fn journal_path(root: &Path) -> PathBuf {
    rounds_dir(root).join("journal.jsonl")
}

pub fn save_cadence(root: &Path, c: &Cadence) -> std::io::Result<()> {
    state::save_json(&cadence_path(root), c)
}

/// One journal line.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct JournalLine {
    /// "round", "accepted", "suppressed", "finished", "self-wake".
    pub event: String,
    #[serde(default)]
    pub round_id: String,
    #[serde(default)]
    pub deadline_ms: i64,
    #[serde(default)]
    pub at_ms: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lead: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wake_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fingerprint: String,
}

/// Appends one fsynced journal line.
pub fn journal(root: &Path, line: &JournalLine) -> std::io::Result<()> {
    let path = journal_path(root);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let mut text = serde_json::to_string(line).map_err(std::io::Error::other)?;
    text.push('\n');
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// Every readable journal line (a torn last line is skipped).
pub fn read_journal(root: &Path) -> Vec<JournalLine> {
    std::fs::read_to_string(journal_path(root))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<JournalLine>(l).ok())
        .map(|mut l| {
            l.lead = leads::head_named(&l.lead).to_string();
            l
        })
        .collect()
}

/// The exclusive lock on the cadence, held for the process's life.
pub struct CadenceLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// Takes the lock, or says another scheduler holds it.
pub fn lock_cadence(root: &Path) -> anyhow::Result<CadenceLock> {
    state::private_dir(&rounds_dir(root))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(rounds_dir(root).join("cadence.lock"))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(CadenceLock { _lock: lock }),
        Err((_, e)) => anyhow::bail!(
            "another auto-scheduler owns auto-rounds/cadence.json ({e}); only one may run"
        ),
    }
}

/// Loads the cadence. Missing: initialise from the latest retained round,
/// or a fresh deadline one tick from now, and save it. Unreadable: `Err`
/// with the reason, and nothing is written.
pub fn load_cadence(root: &Path, now: i64, tick_ms: i64) -> Result<Cadence, String> {
    match state::load_json::<Cadence>(&cadence_path(root)) {
        // Fences kept when the head was `global` stay the head's: renamed
        // in memory, written under the new name with the next save.
        Loaded::Ok(mut c) => {
            if let Some(fence) = c.leads.remove(leads::LEGACY_HEAD) {
                c.leads.entry(leads::HEAD.to_string()).or_insert(fence);
            }
            Ok(c)
        }
        Loaded::Unreadable(e) => Err(format!(
            "auto-rounds/cadence.json cannot be read ({e}); Auto checks are stopped until the owner repairs or removes it"
        )),
        Loaded::Missing => {
            let last = read_journal(root)
                .iter()
                .filter(|l| l.event == "round")
                .map(|l| l.deadline_ms)
                .max();
            let c = Cadence {
                version: 1,
                next_deadline_ms: last.map_or(now + tick_ms, |d| d + tick_ms),
                leads: BTreeMap::new(),
            };
            save_cadence(root, &c).map_err(|e| format!("saving a first cadence: {e}"))?;
            Ok(c)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_switch_reads_as_off_and_a_missing_one_is_off() {
        let dir = tempfile::tempdir().expect("tmp");
        assert!(!read_autonomy(dir.path()).on());
        save_autonomy(
            dir.path(),
            &AutonomyFile {
                on: true,
                level: AutonomyLevel::Full,
                scheduled: vec![],
            },
        )
        .expect("save");
        assert!(read_autonomy(dir.path()).on());
        std::fs::write(autonomy_path(dir.path()), b"{not json").expect("corrupt");
        let a = read_autonomy(dir.path());
        assert!(!a.on());
        assert!(a.problem.is_some());
    }

    #[test]
    fn a_first_cadence_starts_from_the_latest_round_or_a_fresh_deadline() {
        let dir = tempfile::tempdir().expect("tmp");
        state::private_dir(&rounds_dir(dir.path())).expect("dir");
        let c = load_cadence(dir.path(), 1_000, 100).expect("fresh");
        assert_eq!(c.next_deadline_ms, 1_100);
        std::fs::remove_file(cadence_path(dir.path())).expect("rm");
        journal(
            dir.path(),
            &JournalLine {
                event: "round".into(),
                deadline_ms: 700,
                ..Default::default()
            },
        )
        .expect("journal");
        let c = load_cadence(dir.path(), 1_000, 100).expect("from journal");
        assert_eq!(c.next_deadline_ms, 800, "overdue: it fires once at start");
        std::fs::write(cadence_path(dir.path()), b"garbage").expect("corrupt");
        assert!(load_cadence(dir.path(), 1_000, 100).is_err());
        assert_eq!(
            std::fs::read(cadence_path(dir.path())).expect("kept"),
            b"garbage",
            "an unreadable cadence is never overwritten"
        );
        let _held = lock_cadence(dir.path()).expect("lock");
        assert!(lock_cadence(dir.path()).is_err(), "one scheduler at a time");
    }
}
