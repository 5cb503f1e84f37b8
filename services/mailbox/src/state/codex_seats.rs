//! `local-codex-seats.json`: the registrations of hired Codex seats.
//!
//! A hired Codex runs its MCP servers, the fleet bridge among them, under an
//! app-server: the daemon Codex starts for the hire's home, which outlives
//! the pane and a restart of the stack. When such a hire's seat first polls
//! ready, its registration is completed here: the pane it was hired into,
//! the server the bridge runs under and the pane's foreground Codex, each as
//! the kernel named it (pid, pidfs id, birth). Every later request of that
//! hire is held against it, across restarts of the stack: the same server,
//! the same pane and the same foreground occupant, so a replacement never
//! inherits an old worker's identity.
//!
//! The file lives in the state folder itself, beside no service's code. An
//! unreadable file never blocks a start: it is moved aside and no seat is
//! restored (those hires' requests are refused until they are hired
//! again). Written by atomic rename after fsync.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use clankie_runtime::state::{self, Loaded};

pub const FILE: &str = "local-codex-seats.json";

/// A process as the kernel named it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Proc {
    pub pid: i32,
    /// The pidfs inode, never reused within a boot (0: unavailable).
    #[serde(default)]
    pub pidfs_id: u64,
    pub start_time: u64,
}

impl Proc {
    /// The same process: the same pidfs inode where both have one, else the
    /// same pid born at the same tick.
    pub fn same(&self, other: &Proc) -> bool {
        if self.pidfs_id != 0 && other.pidfs_id != 0 {
            return self.pidfs_id == other.pidfs_id;
        }
        self.pid == other.pid && self.start_time == other.start_time
    }
}

/// One hired Codex seat's completed registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CodexSeat {
    pub hire_id: String,
    pub link_id: String,
    pub pane_id: String,
    /// The app-server the bridge runs under (the bridge's parent).
    pub server: Proc,
    /// The pane's foreground Codex.
    pub occupant: Proc,
    pub registered_at_ms: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FileV1 {
    version: u32,
    seats: Vec<CodexSeat>,
}

/// Why a request does not hold against its hire's registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// No registration for a hire that completed one: the file was
    /// unreadable at start, or the hire is older than these records.
    Unrestored,
    ServerChanged,
    OccupantChanged,
    PaneChanged,
}

impl Mismatch {
    pub fn reason(self) -> &'static str {
        match self {
            Mismatch::Unrestored => "codex_seat_unrestored",
            Mismatch::ServerChanged => "codex_server_changed",
            Mismatch::OccupantChanged => "codex_occupant_changed",
            Mismatch::PaneChanged => "codex_pane_changed",
        }
    }
}

/// What one request shows of a Codex seat.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub link_id: &'a str,
    pub pane_id: &'a str,
    /// The connection owner's parent (None: the owner has none in the pane).
    pub server: Option<Proc>,
    pub occupant: Proc,
}

impl CodexSeat {
    /// Whether a request shows this very seat.
    pub fn check(&self, seen: &Seen<'_>) -> Result<(), Mismatch> {
        if self.link_id != seen.link_id || self.pane_id != seen.pane_id {
            return Err(Mismatch::PaneChanged);
        }
        if !self.occupant.same(&seen.occupant) {
            return Err(Mismatch::OccupantChanged);
        }
        if !seen.server.is_some_and(|s| self.server.same(&s)) {
            return Err(Mismatch::ServerChanged);
        }
        Ok(())
    }
}

/// The registrations, as read at start and changed since.
#[derive(Debug)]
pub struct CodexSeats {
    path: PathBuf,
    seats: Vec<CodexSeat>,
    /// Unreadable at start and still in place: never written.
    stuck: bool,
}

impl CodexSeats {
    /// Reads `dir/local-codex-seats.json`. A missing file holds nothing; an
    /// unreadable one is moved aside (its new name is returned) and nothing
    /// is restored.
    pub fn open(dir: &Path) -> (CodexSeats, Option<PathBuf>) {
        let path = dir.join(FILE);
        let (seats, aside) = match state::load_json::<FileV1>(&path) {
            Loaded::Missing => (Vec::new(), None),
            Loaded::Ok(f) if f.version == 1 => (f.seats, None),
            Loaded::Ok(_) | Loaded::Unreadable(_) => (Vec::new(), Some(state::move_aside(&path))),
        };
        // A file that could not be moved aside is never saved over.
        let stuck = matches!(aside, Some(Err(_)));
        let aside = aside.map(|a| a.unwrap_or_else(|_| path.clone()));
        (CodexSeats { path, seats, stuck }, aside)
    }

    pub fn find(&self, hire_id: &str) -> Option<&CodexSeat> {
        self.seats.iter().find(|s| s.hire_id == hire_id)
    }

    /// Completes a hire's registration (replacing none: a hire registers
    /// once).
    pub fn register(&mut self, seat: CodexSeat) -> std::io::Result<()> {
        if self.find(&seat.hire_id).is_some() {
            return Ok(());
        }
        let mut next = self.seats.clone();
        next.push(seat);
        self.save(next)
    }

    /// Drops the registrations of hires that ended.
    pub fn forget(&mut self, ended: impl Fn(&str) -> bool) -> std::io::Result<()> {
        if !self.seats.iter().any(|s| ended(&s.hire_id)) {
            return Ok(());
        }
        let next = self
            .seats
            .iter()
            .filter(|s| !ended(&s.hire_id))
            .cloned()
            .collect();
        self.save(next)
    }

    /// Writes `seats` and only then holds them: a failed write leaves memory
    /// as the file is.
    fn save(&mut self, seats: Vec<CodexSeat>) -> std::io::Result<()> {
        if self.stuck {
            return Err(std::io::Error::other(
                "the Codex seat registrations were unreadable and could not be moved aside",
            ));
        }
        state::save_json(
            &self.path,
            &FileV1 {
                version: 1,
                seats: seats.clone(),
            },
        )?;
        self.seats = seats;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(hire: &str) -> CodexSeat {
        CodexSeat {
            hire_id: hire.into(),
            link_id: "l".into(),
            pane_id: "%1".into(),
            server: Proc {
                pid: 10,
                pidfs_id: 100,
                start_time: 5,
            },
            occupant: Proc {
                pid: 9,
                pidfs_id: 90,
                start_time: 4,
            },
            registered_at_ms: 1,
        }
    }

    fn seen(s: &CodexSeat) -> Seen<'_> {
        Seen {
            link_id: &s.link_id,
            pane_id: &s.pane_id,
            server: Some(s.server),
            occupant: s.occupant,
        }
    }

    #[test]
    fn a_registration_survives_a_reopen_and_is_dropped_when_its_hire_ends() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut seats, aside) = CodexSeats::open(dir.path());
        assert!(aside.is_none());
        seats.register(seat("h1")).expect("register");
        seats.register(seat("h2")).expect("register");
        let (mut again, _) = CodexSeats::open(dir.path());
        assert_eq!(again.find("h1"), Some(&seat("h1")));
        again.forget(|h| h == "h1").expect("forget");
        let (third, _) = CodexSeats::open(dir.path());
        assert!(third.find("h1").is_none() && third.find("h2").is_some());
    }

    #[test]
    fn an_unreadable_file_is_moved_aside_and_restores_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join(FILE), b"{\"version\": 1, \"seats\": [").expect("w");
        let (mut seats, aside) = CodexSeats::open(dir.path());
        let aside = aside.expect("moved aside");
        assert_eq!(
            std::fs::read(&aside).expect("kept"),
            b"{\"version\": 1, \"seats\": [",
            "the unreadable file is kept as it was"
        );
        assert!(!dir.path().join(FILE).exists());
        assert!(seats.find("h1").is_none());
        seats.register(seat("h3")).expect("a new hire registers");
        assert!(CodexSeats::open(dir.path()).0.find("h3").is_some());
        // An unknown version is not guessed at either.
        std::fs::write(dir.path().join(FILE), b"{\"version\": 2, \"seats\": []}").expect("w");
        assert!(CodexSeats::open(dir.path()).1.is_some());
    }

    #[test]
    fn a_request_holds_only_with_the_same_server_occupant_and_pane() {
        let s = seat("h1");
        assert_eq!(s.check(&seen(&s)), Ok(()));
        let mut other = seen(&s);
        other.server = Some(Proc {
            pid: 10,
            pidfs_id: 101,
            start_time: 5,
        });
        assert_eq!(s.check(&other), Err(Mismatch::ServerChanged));
        other.server = None;
        assert_eq!(s.check(&other), Err(Mismatch::ServerChanged));
        let mut other = seen(&s);
        other.occupant = Proc {
            pid: 9,
            pidfs_id: 0,
            start_time: 6,
        };
        assert_eq!(s.check(&other), Err(Mismatch::OccupantChanged));
        let mut other = seen(&s);
        other.pane_id = "%2";
        assert_eq!(s.check(&other), Err(Mismatch::PaneChanged));
    }

    #[test]
    fn without_pidfs_ids_a_reused_pid_is_told_apart_by_its_birth() {
        let a = Proc {
            pid: 7,
            pidfs_id: 0,
            start_time: 1,
        };
        assert!(a.same(&a));
        assert!(!a.same(&Proc { start_time: 2, ..a }));
    }
}
