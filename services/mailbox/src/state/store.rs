//! The mailbox's durable state.
//!
//! - `mailbox/state.json`: projects, conversations and hires, rewritten by
//!   atomic rename after fsync on every change. An unreadable file is never
//!   overwritten: the service refuses changes until the owner inspects it.
//! - `mailbox/transcripts/<conversation>.jsonl`: one entry per line, each
//!   fsynced before it is acknowledged. The transcripts are also the report
//!   receipt ledger: every accepted report's entry carries its receipt id, so
//!   the receipt index is rebuilt from them at startup and a report is one
//!   durable write. A torn last line (a crash mid-append) is skipped on load
//!   and sealed with a newline before the next append.

use clankie_types::Role;
pub use clankie_types::hire::HireEnd;
use clankie_types::transcript::{ConversationKind, EntryKind, EntryRole};
use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use clankie_runtime::ClankieError;
use clankie_runtime::state::{self, Guarded};
use serde::{Deserialize, Serialize};

pub use clankie_types::TrackerBinding;

/// The id of the global head conversation, which always exists.
pub use clankie_types::leads::HEAD;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRec {
    pub workspace_id: String,
    pub path: String,
    #[serde(default)]
    pub machine: String,
    #[serde(default)]
    pub platform: String,
    /// The workspace's saved tracker convention.
    #[serde(default)]
    pub convention: TrackerBinding,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectRec {
    pub project_id: String,
    pub name: String,
    pub workspaces: Vec<WorkspaceRec>,
    #[serde(default)]
    pub lead_conversation_id: String,
    pub worker_cap: u32,
    #[serde(default)]
    pub standing_reviewer: bool,
    pub revision: u64,
    pub created_at_ms: i64,
    /// The tracker binding.
    #[serde(default)]
    pub tracker: TrackerBinding,
    #[serde(default)]
    pub tracker_team: String,
    #[serde(default)]
    pub linear_project_id: String,
    /// On Auto: the lead works it without being told.
    #[serde(default)]
    pub auto: bool,
    /// One line for the lead (at most 280 characters).
    #[serde(default)]
    pub focus: String,
    /// Owner overrides for autonomous work (absent: allowed).
    #[serde(default)]
    pub overrides: std::collections::BTreeMap<String, bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationRec {
    pub conversation_id: String,
    pub kind: ConversationKind,
    pub title: String,
    pub created_at_ms: i64,
    #[serde(default)]
    pub removed: bool,
    /// The lead chat's folder, for workspace matching.
    #[serde(default)]
    pub workspace: String,
    /// Tracker projects it owns (team keys, Linear project UUIDs).
    #[serde(default)]
    pub projects: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HireRec {
    pub hire_id: String,
    pub conversation_id: String,
    pub project_id: String,
    /// Lead, reviewer or worker.
    pub role: Role,
    pub link_id: String,
    pub fleet: String,
    pub pane_id: String,
    pub workspace: String,
    pub command: Vec<String>,
    pub created_at_ms: i64,
    /// None while open (`""` on disk).
    #[serde(default, with = "ended_word")]
    pub ended: Option<HireEnd>,
    #[serde(default)]
    pub hand_started: bool,
    /// Completions its lead has heard (`watch:<hire>:<n>` receipts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub harvests: u32,
    /// Its host last said its agent is done (heard once per time).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agent_done: bool,
    /// Closed, and its tracker bookkeeping not yet settled: retried until
    /// it is, under the same receipts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retire_pending: bool,
    /// The occupant's identity, recorded when its seat is first proven.
    #[serde(default)]
    pub occupant_pid: i32,
    #[serde(default)]
    pub occupant_pidfs_id: u64,
    #[serde(default)]
    pub occupant_start_time: u64,
    /// Started under the worker sandbox (bubblewrap).
    #[serde(default)]
    pub sandboxed: bool,
    /// The seat's control routes answer only the harness process itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub harness_only_control: bool,
    /// The harness the pane runs (`claude`, `codex`, `pi`; empty: a plain
    /// command) and its executable as the kernel names it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub harness: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub harness_executable: String,
    /// When its seat first polled ready (0: not yet).
    #[serde(default)]
    pub ready_at_ms: i64,
    /// Why its seat is not ready yet, a fixed reason (empty: none known).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub not_ready: String,
    /// Records written when a launch token guarded the control routes: its
    /// hash meant what `harness_only_control` means now. Read, never written.
    #[serde(default, rename = "launchTokenSha256", skip_serializing)]
    pub legacy_launch_token: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `ended` as the file has always spelled it: `""` while open, else the
/// word. A word this build does not know makes the file unreadable (the
/// fail-safe path), never a guess.
mod ended_word {
    use super::HireEnd;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(end: &Option<HireEnd>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(end.map_or("", HireEnd::as_str))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<HireEnd>, D::Error> {
        match String::deserialize(d)?.as_str() {
            "" => Ok(None),
            word => HireEnd::parse(word)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown hire end {word:?}"))),
        }
    }
}

impl HireRec {
    /// The record of a seat Clankie did not hire: a worker of no project
    /// and no lead (unowned) until a conversation messages it, ready as it
    /// is seen (it is already polling).
    pub fn hand_started(hire_id: String, seat: &crate::seats::SeatRec, now: i64) -> HireRec {
        HireRec {
            hire_id,
            conversation_id: String::new(),
            project_id: String::new(),
            role: Role::Worker,
            link_id: seat.link_id.clone(),
            fleet: seat.fleet.clone(),
            pane_id: seat.pane_id.clone(),
            workspace: String::new(),
            command: Vec::new(),
            created_at_ms: now,
            ended: None,
            hand_started: true,
            harvests: 0,
            agent_done: false,
            retire_pending: false,
            occupant_pid: seat.agent_pid,
            occupant_pidfs_id: seat.agent_pidfs_id,
            occupant_start_time: seat.agent_start_time,
            sandboxed: false,
            harness_only_control: false,
            harness: String::new(),
            harness_executable: String::new(),
            ready_at_ms: now,
            not_ready: String::new(),
            legacy_launch_token: String::new(),
        }
    }

    /// Whether an observed seat is this hire's harness as it was launched.
    /// A Claude hire's seat must be the exact launcher's chain: the
    /// launcher running exactly the recorded command (as the kernel
    /// retains arguments: empty ones dropped, at most 64 of 1024 bytes) and
    /// its child the recorded Claude, or that file replaced on disk while
    /// it ran. Other harnesses are not bound.
    pub fn launched_as(&self, launcher_argv: &[String], agent_executable: &str) -> bool {
        if self.harness != "claude" {
            return true;
        }
        let retained: Vec<String> = self
            .command
            .iter()
            .filter(|a| !a.is_empty())
            .take(64)
            .map(|a| {
                let mut end = a.len().min(1024);
                while !a.is_char_boundary(end) {
                    end -= 1;
                }
                a[..end].to_string()
            })
            .collect();
        let exe = agent_executable
            .strip_suffix(" (deleted)")
            .unwrap_or(agent_executable);
        !launcher_argv.is_empty()
            && launcher_argv == retained.as_slice()
            && !self.harness_executable.is_empty()
            && exe == self.harness_executable
    }

    /// Whether the seat's control routes answer only the harness itself.
    pub fn harness_only(&self) -> bool {
        self.harness_only_control || !self.legacy_launch_token.is_empty()
    }

    /// Not yet closed or gone.
    pub fn is_open(&self) -> bool {
        self.ended.is_none()
    }

    /// A ready Codex hire, whose requests hold against its registration.
    pub fn is_registered_codex(&self) -> bool {
        self.harness == "codex" && self.ready_at_ms != 0
    }
}

/// The open hire in a pane among `hires`: a pane holds at most one at a
/// time.
pub fn hire_in<'a>(hires: &'a [HireRec], link_id: &str, pane_id: &str) -> Option<&'a HireRec> {
    hires
        .iter()
        .find(|h| h.is_open() && h.link_id == link_id && h.pane_id == pane_id)
}

impl StateFile {
    /// The open hire in a pane ([`hire_in`]).
    pub fn hire_in(&self, link_id: &str, pane_id: &str) -> Option<&HireRec> {
        hire_in(&self.hires, link_id, pane_id)
    }

    pub fn hire_in_mut(&mut self, link_id: &str, pane_id: &str) -> Option<&mut HireRec> {
        self.hires
            .iter_mut()
            .find(|h| h.is_open() && h.link_id == link_id && h.pane_id == pane_id)
    }
}

/// A project name: 1-64 letters, digits, `-`, `_` or `.`, never `.` or
/// `..` (it names folders and appears in paths and terminals).
pub fn valid_project_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateFile {
    pub version: u32,
    pub projects: Vec<ProjectRec>,
    pub conversations: Vec<ConversationRec>,
    pub hires: Vec<HireRec>,
}

/// One transcript line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EntryRec {
    pub seq: u64,
    pub kind: EntryKind,
    pub role: EntryRole,
    pub text: String,
    pub source: String,
    pub untrusted: bool,
    pub at_ms: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub receipt_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hire_id: String,
}

/// Where an accepted report landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub conversation_id: String,
    pub seq: u64,
    pub hire_id: String,
    /// Who sent it (`hire:ID`, or `pane:LINK:PANE` for a pane with no hire).
    pub source: String,
}

impl Accepted {
    /// Whether the report was sent from this pane: by a hire recorded in it,
    /// or by the pane itself when it held none. Another pane's receipt is
    /// never answered as its own.
    pub fn from_pane(&self, state: &StateFile, link_id: &str, pane_id: &str) -> bool {
        if self.source == format!("pane:{link_id}:{pane_id}") {
            return true;
        }
        !self.hire_id.is_empty()
            && state
                .hires
                .iter()
                .any(|h| h.hire_id == self.hire_id && h.link_id == link_id && h.pane_id == pane_id)
    }
}

pub struct Store {
    dir: PathBuf,
    /// `state.json`; when it could not be read at start, no change is
    /// saved over it.
    pub state: Guarded<StateFile>,
    last_seq: HashMap<String, u64>,
    receipts: HashMap<String, Accepted>,
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Reads every whole line of a transcript; a torn last line is skipped.
fn read_entries(path: &Path) -> Vec<EntryRec> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<EntryRec>(l).ok())
        .collect()
}

/// The global head's conversation, which every state holds.
fn head() -> ConversationRec {
    ConversationRec {
        conversation_id: HEAD.into(),
        kind: ConversationKind::Head,
        title: "Clankie".into(),
        created_at_ms: now_ms(),
        removed: false,
        workspace: String::new(),
        projects: Vec::new(),
    }
}

/// A state with nothing but the head: a fresh file, and the fail-safe of
/// an unreadable one.
fn with_head() -> StateFile {
    StateFile {
        conversations: vec![head()],
        ..StateFile::default()
    }
}

impl Store {
    pub fn open(dir: PathBuf) -> std::io::Result<Store> {
        state::private_dir(&dir)?;
        state::private_dir(&dir.join("transcripts"))?;
        let mut state = Guarded::load(dir.join("state.json"), with_head, with_head);
        super::legacy_head::migrate(&dir, &mut state)?;
        if let Some(e) = state.unreadable() {
            tracing::error!(error = %e, "mailbox state is unreadable; changes are refused until the owner inspects it");
        } else if !state
            .conversations
            .iter()
            .any(|c| c.conversation_id == HEAD)
        {
            // A file written by hand without the head gets it back.
            state
                .update(|s| s.conversations.insert(0, head()))
                .map_err(std::io::Error::other)?;
        }
        let mut store = Store {
            dir,
            state,
            last_seq: HashMap::new(),
            receipts: HashMap::new(),
        };
        store.index()?;
        Ok(store)
    }

    fn transcript_path(&self, conversation_id: &str) -> PathBuf {
        self.dir
            .join("transcripts")
            .join(format!("{conversation_id}.jsonl"))
    }

    /// Rebuilds sequence numbers and the receipt index from the transcripts.
    fn index(&mut self) -> std::io::Result<()> {
        for entry in std::fs::read_dir(self.dir.join("transcripts"))? {
            let path = entry?.path();
            let Some(conv) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".jsonl"))
                .map(str::to_string)
            else {
                continue;
            };
            for e in read_entries(&path) {
                let last = self.last_seq.entry(conv.clone()).or_default();
                *last = (*last).max(e.seq);
                if !e.receipt_id.is_empty() {
                    self.receipts.insert(
                        e.receipt_id.clone(),
                        Accepted {
                            conversation_id: conv.clone(),
                            seq: e.seq,
                            hire_id: e.hire_id.clone(),
                            source: e.source.clone(),
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// Whether `state.json` was unreadable at start (nothing is saved).
    pub fn unreadable(&self) -> bool {
        self.state.unreadable().is_some()
    }

    /// Refuses an owner's read while `state.json` is unreadable: an empty
    /// answer would say there is nothing, which nobody knows.
    pub fn readable(&self) -> Result<(), ClankieError> {
        if self.unreadable() {
            return Err(clankie_runtime::ErrorCode::StateUnreadable.err(
                "the mailbox state (mailbox/state.json) cannot be read; the owner must inspect it (its log says why)",
            ));
        }
        Ok(())
    }

    /// Changes `state.json` (see [`crate::change`]).
    pub fn change<R>(
        &mut self,
        change: impl FnOnce(&mut StateFile) -> Result<R, ClankieError>,
    ) -> Result<R, ClankieError> {
        crate::change(&mut self.state, "the mailbox state", change)
    }

    /// Changes `state.json` when the change says it changed anything.
    pub fn change_when<R>(
        &mut self,
        change: impl FnOnce(&mut StateFile) -> Result<(R, bool), ClankieError>,
    ) -> Result<R, ClankieError> {
        crate::change_when(&mut self.state, "the mailbox state", change)
    }

    pub fn receipt(&self, receipt_id: &str) -> Option<&Accepted> {
        self.receipts.get(receipt_id)
    }

    pub fn last_seq(&self, conversation_id: &str) -> u64 {
        self.last_seq.get(conversation_id).copied().unwrap_or(0)
    }

    /// Appends one entry durably (fsync) and returns its sequence number.
    pub fn append(&mut self, conversation_id: &str, mut entry: EntryRec) -> std::io::Result<u64> {
        let path = self.transcript_path(conversation_id);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)?;
        // Seal a torn last line so the new entry starts on its own line.
        let len = file.metadata()?.len();
        if len > 0 {
            use std::io::{Read as _, Seek as _, SeekFrom};
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        let seq = self.last_seq(conversation_id) + 1;
        entry.seq = seq;
        let mut line = serde_json::to_vec(&entry)?;
        line.push(b'\n');
        clankie_runtime::blocking::off_worker(|| {
            file.write_all(&line)?;
            file.sync_data()
        })?;
        self.last_seq.insert(conversation_id.to_string(), seq);
        if !entry.receipt_id.is_empty() {
            self.receipts.insert(
                entry.receipt_id.clone(),
                Accepted {
                    conversation_id: conversation_id.to_string(),
                    seq,
                    hire_id: entry.hire_id.clone(),
                    source: entry.source.clone(),
                },
            );
        }
        Ok(seq)
    }

    /// Entries of a conversation with `seq > after`, at most `limit`.
    pub fn entries(&self, conversation_id: &str, after: u64, limit: usize) -> Vec<EntryRec> {
        read_entries(&self.transcript_path(conversation_id))
            .into_iter()
            .filter(|e| e.seq > after)
            .take(limit)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hire as the file has always held it: role and end as words.
    fn hire_on_disk(role: &str, ended: &str) -> serde_json::Value {
        serde_json::json!({
            "hireId": "h1", "conversationId": "c", "projectId": "p", "role": role,
            "linkId": "l", "fleet": "f", "paneId": "%1", "workspace": "/w",
            "command": ["x"], "createdAtMs": 1, "ended": ended, "handStarted": false,
            "occupantPid": 0, "occupantPidfsId": 0, "occupantStartTime": 0,
            "sandboxed": false, "readyAtMs": 0,
        })
    }

    #[test]
    fn a_hire_reads_and_writes_back_as_the_file_spells_it() {
        for (role, ended, end) in [
            ("worker", "", None),
            ("reviewer", "closed", Some(HireEnd::Closed)),
            ("lead", "gone", Some(HireEnd::Gone)),
        ] {
            let disk = hire_on_disk(role, ended);
            let h: HireRec = serde_json::from_value(disk.clone()).expect("reads");
            assert_eq!(h.role.as_str(), role);
            assert_eq!(h.ended, end);
            assert_eq!(serde_json::to_value(&h).expect("writes"), disk);
        }
    }

    #[test]
    fn an_unknown_role_or_end_is_unreadable_never_guessed() {
        assert!(serde_json::from_value::<HireRec>(hire_on_disk("boss", "")).is_err());
        assert!(serde_json::from_value::<HireRec>(hire_on_disk("worker", "paused")).is_err());
    }

    #[test]
    fn transcript_lines_and_conversations_read_and_write_back_as_the_files_spell_them() {
        for (kind, role) in [
            ("message", "agent"),
            ("watch", "agent"),
            ("wake", "system"),
            ("owner", "owner"),
            ("peer", "agent"),
        ] {
            let line = serde_json::json!({
                "seq": 3, "kind": kind, "role": role, "text": "t", "source": "hire:h1",
                "untrusted": true, "atMs": 9, "receiptId": "rpt_1",
            });
            let e: EntryRec = serde_json::from_value(line.clone()).expect("reads");
            assert_eq!((e.kind.as_str(), e.role.as_str()), (kind, role));
            assert_eq!(serde_json::to_value(&e).expect("writes"), line);
        }
        for kind in ["head", "lead"] {
            let disk = serde_json::json!({
                "conversationId": "c", "kind": kind, "title": "t", "createdAtMs": 1,
                "removed": false, "workspace": "", "projects": [],
            });
            let c: ConversationRec = serde_json::from_value(disk.clone()).expect("reads");
            assert_eq!(serde_json::to_value(&c).expect("writes"), disk);
        }
        let torn = serde_json::json!({
            "seq": 3, "kind": "shout", "role": "agent", "text": "t", "source": "s",
            "untrusted": true, "atMs": 9,
        });
        assert!(serde_json::from_value::<EntryRec>(torn).is_err());
    }

    #[test]
    fn project_names_cannot_climb_folders_or_carry_controls() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../x",
            "a\u{1b}b",
            "tab\tname",
            &"x".repeat(65),
        ] {
            assert!(!valid_project_name(bad), "{bad:?}");
        }
        for good in ["alpha", "a.b", "...", "v1_2-3"] {
            assert!(valid_project_name(good), "{good:?}");
        }
    }

    fn entry(receipt: &str) -> EntryRec {
        EntryRec {
            seq: 0,
            kind: EntryKind::Message,
            role: EntryRole::Agent,
            text: "done".into(),
            source: "hire:h1".into(),
            untrusted: true,
            at_ms: 1,
            receipt_id: receipt.into(),
            hire_id: "h1".into(),
        }
    }

    #[test]
    fn a_report_is_its_panes_by_its_hire_or_by_the_pane_it_came_from() {
        let hire: HireRec = serde_json::from_value(hire_on_disk("worker", "")).expect("hire");
        let state = StateFile {
            hires: vec![hire],
            ..StateFile::default()
        };
        let by_hire = Accepted {
            conversation_id: "c".into(),
            seq: 1,
            hire_id: "h1".into(),
            source: "hire:h1".into(),
        };
        assert!(by_hire.from_pane(&state, "l", "%1"));
        assert!(!by_hire.from_pane(&state, "l", "%2"));
        assert!(!by_hire.from_pane(&state, "other", "%1"));
        let by_pane = Accepted {
            hire_id: String::new(),
            source: "pane:l:%2".into(),
            ..by_hire
        };
        assert!(by_pane.from_pane(&state, "l", "%2"));
        assert!(!by_pane.from_pane(&state, "l", "%1"));
    }

    #[test]
    fn receipts_survive_reopen_and_a_torn_tail_is_sealed() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("mailbox");
        let mut s = Store::open(root.clone()).expect("open");
        assert_eq!(s.append(HEAD, entry("r1")).expect("append"), 1);
        drop(s);
        // A crash mid-append leaves half a line.
        let path = root.join("transcripts").join(format!("{HEAD}.jsonl"));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(b"{\"seq\":2,\"kind\":\"mess").expect("torn");
        drop(f);
        let mut s = Store::open(root.clone()).expect("reopen");
        assert_eq!(s.receipt("r1").map(|a| a.seq), Some(1));
        assert_eq!(s.append(HEAD, entry("r2")).expect("append"), 2);
        let all = s.entries(HEAD, 0, 10);
        assert_eq!(
            all.iter()
                .map(|e| e.receipt_id.as_str())
                .collect::<Vec<_>>(),
            ["r1", "r2"]
        );
    }

    #[test]
    fn an_unreadable_state_file_is_never_saved_over() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("mailbox");
        std::fs::create_dir_all(&root).expect("dir");
        std::fs::write(root.join("state.json"), b"{not json").expect("write");
        let mut s = Store::open(root.clone()).expect("open");
        assert!(s.unreadable());
        let refused = s.change(|s| {
            s.conversations.clear();
            Ok(())
        });
        assert_eq!(
            refused.map_err(|e| e.code),
            Err(clankie_runtime::ErrorCode::ServiceUnavailable)
        );
        assert_eq!(s.state.conversations.len(), 1, "the head, in memory");
        assert_eq!(
            std::fs::read(root.join("state.json")).expect("read"),
            b"{not json"
        );
    }

    /// Projects written before the tracker binding was an enum still load,
    /// and are written back with the same strings.
    #[test]
    fn a_state_file_written_before_the_binding_enum_still_loads() {
        let old = serde_json::json!({
            "version": 1,
            "projects": [
                {"projectId": "p1", "name": "alpha", "leadConversationId": "", "workerCap": 4,
                 "revision": 3, "createdAtMs": 1, "tracker": "builtin", "trackerTeam": "ENG",
                 "workspaces": [{"workspaceId": "w1", "path": "/a", "convention": "linear"}]},
                {"projectId": "p2", "name": "beta", "workerCap": 4, "revision": 1,
                 "createdAtMs": 2, "tracker": "",
                 "workspaces": [{"workspaceId": "w2", "path": "/b"}]}
            ],
            "conversations": [],
            "hires": []
        });
        let state: StateFile = serde_json::from_value(old).expect("loads");
        assert_eq!(state.projects[0].tracker, TrackerBinding::Builtin);
        assert_eq!(
            state.projects[0].workspaces[0].convention,
            TrackerBinding::Linear
        );
        assert_eq!(state.projects[1].tracker, TrackerBinding::Unbound);
        assert_eq!(
            state.projects[1].workspaces[0].convention,
            TrackerBinding::Unbound
        );
        let back = serde_json::to_value(&state).expect("writes");
        assert_eq!(back["projects"][0]["tracker"], "builtin");
        assert_eq!(back["projects"][0]["workspaces"][0]["convention"], "linear");
        assert_eq!(back["projects"][1]["tracker"], "");
    }
}
