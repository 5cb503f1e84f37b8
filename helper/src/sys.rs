//! Kernel facts about processes, read fresh on every call.
//!
//! Linux: `/proc/PID/{stat,status,exe,cmdline}` and a pidfd (`pidfd_open`),
//! whose pidfs inode (Linux 6.9+) names the process uniquely within a boot.
//! The start time is read before and after the pidfd is opened, so the pidfd
//! is known to belong to the process whose facts were read. Every call here
//! goes through rustix's safe wrappers; no `unsafe` is needed on Linux.
//! macOS (libproc) is not built yet: see `docs/ARCHITECTURE.md`.

use clankie_proto::helper::v1 as helper_pb;

/// Why a process could not be observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObsError {
    /// The process is gone (or its PID was reused during the read).
    Gone,
    /// The kernel refused to show it.
    Denied,
    /// Any other failure, with its errno.
    Io(i32),
}

impl ObsError {
    /// A fixed reason, never a PID or path.
    pub fn reason(self) -> clankie_proto::helper::v1::Reason {
        use clankie_proto::helper::v1::Reason;
        match self {
            ObsError::Gone => Reason::ProcessGone,
            ObsError::Denied => Reason::ObservationDenied,
            ObsError::Io(_) => Reason::ObservationFailed,
        }
    }

    pub fn errno(self) -> i32 {
        match self {
            ObsError::Io(e) => e,
            _ => 0,
        }
    }

    fn from_io(e: &std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => ObsError::Gone,
            std::io::ErrorKind::PermissionDenied => ObsError::Denied,
            _ => match e.raw_os_error() {
                Some(3) => ObsError::Gone, // ESRCH
                Some(n) => ObsError::Io(n),
                None => ObsError::Io(0),
            },
        }
    }
}

/// One observed process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fact {
    pub pid: i32,
    pub ppid: i32,
    pub uid: u32,
    pub pidfs_id: u64,
    pub start_time: u64,
    pub executable: String,
    pub argv: Vec<String>,
    pub exited: bool,
    pub pgid: i32,
    pub tpgid: i32,
    pub tty: i32,
    pub ns_pid: i32,
    pub ns_depth: u32,
}

impl From<Fact> for helper_pb::ProcessFact {
    fn from(f: Fact) -> Self {
        helper_pb::ProcessFact {
            pid: f.pid,
            ppid: f.ppid,
            uid: f.uid,
            pidfs_id: f.pidfs_id,
            start_time: f.start_time,
            executable: f.executable,
            argv: f.argv,
            exited: f.exited,
            pgid: f.pgid,
            tpgid: f.tpgid,
            tty: f.tty,
            ns_pid: f.ns_pid,
            ns_depth: f.ns_depth,
        }
    }
}

/// The fields of `/proc/PID/stat` the helper uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub state: char,
    pub ppid: i32,
    pub pgid: i32,
    /// The foreground process group of the controlling terminal (-1: none).
    pub tpgid: i32,
    /// The controlling terminal's device number (0: none, as after the
    /// terminal hung up).
    pub tty: i32,
    /// Clock ticks since boot.
    pub start_time: u64,
}

impl Stat {
    pub fn dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Reads `/proc/PID/stat`.
pub fn stat(pid: i32) -> Result<Stat, ObsError> {
    let text =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| ObsError::from_io(&e))?;
    parse_stat(&text).ok_or(ObsError::Io(0))
}

/// Parses the fields after the command name, which may hold spaces and `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<i64>().ok());
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: i32::try_from(field(1)?).ok()?,
        pgid: i32::try_from(field(2)?).ok()?,
        tty: i32::try_from(field(4)?).ok()?,
        tpgid: i32::try_from(field(5)?).ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// Our own effective capabilities, as `/proc/self/status` shows them.
fn own_caps() -> u64 {
    static CAPS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *CAPS.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|t| status_hex(&t, "CapEff:"))
            .unwrap_or(0)
    })
}

fn status_hex(text: &str, key: &str) -> Option<u64> {
    let v = text.lines().find_map(|l| l.strip_prefix(key))?;
    u64::from_str_radix(v.trim(), 16).ok()
}

/// True when `pid` holds permitted capabilities this process lacks: the
/// kernel shields such a process's descriptors from us (the ptrace access
/// rule), whatever its uid.
pub fn more_privileged(pid: i32) -> Result<bool, ObsError> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| ObsError::from_io(&e))?;
    let theirs = status_hex(&text, "CapPrm:").ok_or(ObsError::Io(0))?;
    Ok(theirs & !own_caps() != 0)
}

/// What `/proc/PID/status` says about a process's user and pid namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The real uid.
    pub uid: u32,
    /// The pid in the process's own (innermost) pid namespace.
    pub ns_pid: i32,
    /// How many pid namespaces below ours that is.
    pub ns_depth: u32,
}

/// Reads `/proc/PID/status`.
pub fn status(pid: i32) -> Result<Status, ObsError> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| ObsError::from_io(&e))?;
    parse_status(&text).ok_or(ObsError::Io(0))
}

/// The `Uid:` and `NSpid:` lines (a kernel without `NSpid` shows only its
/// own namespace: the pid itself, depth 0).
pub fn parse_status(text: &str) -> Option<Status> {
    let field = |key: &str| text.lines().find_map(|l| l.strip_prefix(key));
    let uid = field("Uid:")?.split_whitespace().next()?.parse().ok()?;
    let (ns_pid, ns_depth) = match field("NSpid:") {
        Some(v) => {
            let pids: Vec<i32> = v
                .split_whitespace()
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?;
            (*pids.last()?, u32::try_from(pids.len() - 1).ok()?)
        }
        None => (field("Pid:")?.trim().parse().ok()?, 0),
    };
    Some(Status {
        uid,
        ns_pid,
        ns_depth,
    })
}

/// The real uid from `/proc/PID/status`.
pub fn uid(pid: i32) -> Result<u32, ObsError> {
    status(pid).map(|s| s.uid)
}

/// Opens a pidfd for `pid` and returns its pidfs inode.
fn pidfs_id(pid: i32) -> Result<(rustix::fd::OwnedFd, u64), ObsError> {
    let p = rustix::process::Pid::from_raw(pid).ok_or(ObsError::Gone)?;
    let fd = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())
        .map_err(|e| ObsError::from_io(&e.into()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| ObsError::from_io(&e.into()))?;
    Ok((fd, st.st_ino))
}

/// True when the process behind `fd` has exited (a zombie answers every
/// other question; only poll shows the exit).
fn has_exited(fd: &rustix::fd::OwnedFd) -> bool {
    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
}

/// Observes one process, bracketing the pidfd with two start-time reads.
pub fn observe(pid: i32) -> Result<Fact, ObsError> {
    observe_where(pid, || true).map(|(fact, _)| fact)
}

/// Observes only one process's identity: the same bracketed pidfd and
/// `stat`, without reading `status`, `exe` or `cmdline`.
pub fn observe_identity(pid: i32) -> Result<Fact, ObsError> {
    let first = stat(pid)?;
    let (fd, pidfs_id) = pidfs_id(pid)?;
    let again = stat(pid)?;
    if again.start_time != first.start_time {
        return Err(ObsError::Gone);
    }
    Ok(Fact {
        pid,
        ppid: again.ppid,
        pidfs_id,
        start_time: again.start_time,
        exited: again.dead() || has_exited(&fd),
        pgid: again.pgid,
        tpgid: again.tpgid,
        tty: again.tty,
        ..Fact::default()
    })
}

/// Observes one process and asks `holds` about it while its pidfd is open.
/// The answer is `true` only if the pidfd's process was still alive after
/// `holds` returned: a pid cannot be reused before its process is reaped,
/// so whatever `holds` read under `/proc/PID` was that process's. This is
/// how a census's holder is bound to the identity admission compares.
pub fn observe_holding(pid: i32, holds: impl FnOnce() -> bool) -> Result<(Fact, bool), ObsError> {
    observe_where(pid, holds)
}

fn observe_where(pid: i32, holds: impl FnOnce() -> bool) -> Result<(Fact, bool), ObsError> {
    let first = stat(pid)?;
    let (fd, pidfs_id) = pidfs_id(pid)?;
    let again = stat(pid)?;
    if again.start_time != first.start_time {
        return Err(ObsError::Gone);
    }
    let held = holds() && !has_exited(&fd);
    let status = status(pid)?;
    let executable = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().to_string())
        .unwrap_or_default();
    let argv = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .take(64)
                .map(|a| String::from_utf8_lossy(&a[..a.len().min(1024)]).to_string())
                .collect()
        })
        .unwrap_or_default();
    let fact = Fact {
        pid,
        ppid: again.ppid,
        uid: status.uid,
        pidfs_id,
        start_time: again.start_time,
        executable,
        argv,
        exited: again.dead() || has_exited(&fd),
        pgid: again.pgid,
        tpgid: again.tpgid,
        tty: again.tty,
        ns_pid: status.ns_pid,
        ns_depth: status.ns_depth,
    };
    Ok((fact, held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_survives_hostile_command_names() {
        let line = "42 (a) b) (c) S 7 40 41 34816 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                state: 'S',
                ppid: 7,
                pgid: 40,
                tpgid: -1,
                tty: 34816,
                start_time: 123456
            })
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S"), None);
    }

    #[test]
    fn status_names_the_uid_and_the_innermost_pid() {
        let nested = "Name:\tnode\nPid:\t4242\nUid:\t1000\t1000\t1000\t1000\nNSpid:\t4242\t2\n";
        assert_eq!(
            parse_status(nested),
            Some(Status {
                uid: 1000,
                ns_pid: 2,
                ns_depth: 1
            })
        );
        let old_kernel = "Pid:\t7\nUid:\t0\t0\t0\t0\n";
        assert_eq!(
            parse_status(old_kernel),
            Some(Status {
                uid: 0,
                ns_pid: 7,
                ns_depth: 0
            })
        );
        assert_eq!(parse_status("NSpid:\tx\nUid:\t0\n"), None);
    }

    #[test]
    fn observes_itself_and_a_child_that_exits() {
        let me = observe(std::process::id() as i32).expect("self");
        assert!(me.pidfs_id > 0);
        assert!(!me.exited);
        assert_eq!(me.uid, rustix::process::getuid().as_raw());
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id() as i32;
        // Before reaping, the child is a zombie: observed as exited, once it
        // has run (on a busy machine that can take a while; ask again).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let f = loop {
            let f = observe(pid).expect("alive or a zombie");
            if f.exited || std::time::Instant::now() > deadline {
                break f;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(f.exited);
        assert!(observe_identity(pid).expect("a zombie").exited);
        child.wait().expect("reap");
        assert_eq!(observe(pid).err(), Some(ObsError::Gone));
        assert_eq!(observe_identity(pid).err(), Some(ObsError::Gone));
    }

    #[test]
    fn an_identity_observation_reads_the_identity_and_nothing_else() {
        let me = std::process::id() as i32;
        let (full, brief) = (
            observe(me).expect("self"),
            observe_identity(me).expect("self"),
        );
        assert_eq!(
            (brief.pid, brief.ppid, brief.pidfs_id, brief.start_time),
            (full.pid, full.ppid, full.pidfs_id, full.start_time)
        );
        assert_eq!(
            (brief.pgid, brief.tpgid, brief.tty),
            (full.pgid, full.tpgid, full.tty)
        );
        assert!(!brief.exited);
        assert!(brief.executable.is_empty() && brief.argv.is_empty());
        assert!(!full.executable.is_empty());
    }
}
