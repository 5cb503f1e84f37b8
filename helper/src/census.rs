//! The whole-machine descriptor census: which processes hold a socket.
//!
//! Every `/proc/PID/fd` entry is read and compared with `socket:[INODE]`.
//! Bounds, as the seed sets them: transient per-process races retry that
//! process only, with 1–8 ms jitter and at most 32 attempts per PID; a scan
//! may take 200 ms and a job 600 ms; an expired scan, or churn after a
//! matching socket was seen, restarts the whole census. Processes of other
//! users are skipped when a uid is given (the seed's same-user census); an
//! unreadable live process is counted as unreadable and reported, never
//! guessed to be a non-holder. A process the kernel shields because it holds
//! capabilities we lack (a container's init; a file-capability binary) is
//! counted apart as privileged: the same ptrace rule hides it from every
//! process of the user, so it stands outside what the user controls.

use clankie_proto::helper::v1::Reason;
use std::time::{Duration, Instant};

const SCAN_BUDGET: Duration = Duration::from_millis(200);
const JOB_BUDGET: Duration = Duration::from_millis(600);
const MAX_ATTEMPTS: u32 = 32;

/// What a census found.
#[derive(Debug, Default)]
pub struct Holders {
    pub pids: Vec<i32>,
    pub attempts: u32,
    /// Live processes whose descriptor tables could not be read.
    pub unreadable: u32,
    /// Live processes shielded because they hold capabilities we lack.
    pub privileged: u32,
}

struct Jitter(u64);

impl Jitter {
    fn next_ms(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        1 + self.0 % 8
    }
}

enum Scan {
    Done(Holders),
    Restart,
}

/// Finds every process holding socket `inode`.
pub fn socket_holders(inode: u64, uid: Option<u32>) -> Result<Holders, Reason> {
    let job = Instant::now();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9e37)
        | 1;
    let mut jitter = Jitter(seed);
    let target = format!("socket:[{inode}]");
    let mut attempts = 0;
    while job.elapsed() < JOB_BUDGET {
        attempts += 1;
        match scan(&target, uid, &mut jitter, job)? {
            Scan::Done(found) => return Ok(Holders { attempts, ..found }),
            Scan::Restart => continue,
        }
    }
    Err(Reason::CensusTimeout)
}

fn scan(target: &str, uid: Option<u32>, jitter: &mut Jitter, job: Instant) -> Result<Scan, Reason> {
    use rustix::fs::{AtFlags, Dir, Mode, OFlags, openat, statat};
    let started = Instant::now();
    let mut holders = Vec::new();
    let mut unreadable = 0;
    let mut privileged = 0;
    let mut churn_after_match = false;
    let proc_dir = openat(
        rustix::fs::CWD,
        "/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| Reason::ProcUnreadable)?;
    let mut entries = Dir::read_from(&proc_dir).map_err(|_| Reason::ProcUnreadable)?;
    let mut link = vec![0u8; 64];
    while let Some(entry) = entries.read() {
        let Ok(entry) = entry else {
            return Ok(Scan::Restart);
        };
        let name = entry.file_name();
        let Some(pid) = name.to_str().ok().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if started.elapsed() > SCAN_BUDGET || job.elapsed() > JOB_BUDGET {
            return Ok(Scan::Restart);
        }
        if let Some(want) = uid {
            // The owner of /proc/PID is the process's effective uid: one
            // stat instead of reading and parsing its status file.
            match statat(&proc_dir, name, AtFlags::empty()) {
                Ok(st) if st.st_uid != want => continue,
                Ok(_) => {}
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::SRCH) => continue,
                Err(_) => return Err(Reason::CensusUnknownOwner),
            }
        }
        let mut tries = 0;
        loop {
            tries += 1;
            match holds(&proc_dir, pid, target.as_bytes(), &mut link) {
                Ok(true) => {
                    holders.push(pid);
                    break;
                }
                Ok(false) => break,
                Err(Race::Gone) => break,
                Err(Race::Denied) => {
                    // A dying process's table is unreadable, and a dead
                    // process holds nothing; a live one is counted as
                    // unknown for admission to judge.
                    match crate::sys::stat(pid) {
                        Err(crate::sys::ObsError::Gone) => {}
                        Ok(st) if st.dead() => {}
                        _ => match crate::sys::more_privileged(pid) {
                            Ok(true) => privileged += 1,
                            Err(crate::sys::ObsError::Gone) => {}
                            _ => unreadable += 1,
                        },
                    }
                    break;
                }
                Err(Race::Churn) => {
                    if !holders.is_empty() {
                        churn_after_match = true;
                    }
                    if tries >= MAX_ATTEMPTS {
                        return Err(Reason::CensusUnstable);
                    }
                    std::thread::sleep(Duration::from_millis(jitter.next_ms()));
                }
            }
        }
    }
    if churn_after_match {
        return Ok(Scan::Restart);
    }
    holders.sort_unstable();
    Ok(Scan::Done(Holders {
        pids: holders,
        attempts: 0,
        unreadable,
        privileged,
    }))
}

/// Whether `pid` holds socket `inode` now: one process's descriptors, read
/// once. A transient failure counts as not holding.
pub fn holds_socket(pid: i32, inode: u64) -> bool {
    use rustix::fs::{Mode, OFlags, openat};
    let Ok(proc_dir) = openat(
        rustix::fs::CWD,
        "/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let target = format!("socket:[{inode}]");
    let mut link = Vec::new();
    matches!(
        holds(&proc_dir, pid, target.as_bytes(), &mut link),
        Ok(true)
    )
}

enum Race {
    Gone,
    Denied,
    Churn,
}

/// Whether `pid` holds `target` among its descriptors. Every lookup is
/// relative to an open directory, so no path is walked from the root.
fn holds(
    proc_dir: &rustix::fd::OwnedFd,
    pid: i32,
    target: &[u8],
    link: &mut Vec<u8>,
) -> Result<bool, Race> {
    use rustix::fs::{Dir, Mode, OFlags, openat, readlinkat_raw};
    use rustix::io::Errno;
    let fd_dir = match openat(
        proc_dir,
        format!("{pid}/fd"),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(d) => d,
        Err(Errno::NOENT | Errno::SRCH) => return Err(Race::Gone),
        Err(Errno::ACCESS | Errno::PERM) => return Err(Race::Denied),
        Err(_) => return Err(Race::Churn),
    };
    let mut fds = Dir::read_from(&fd_dir).map_err(|_| Race::Churn)?;
    link.resize(target.len() + 1, 0);
    while let Some(entry) = fds.read() {
        let entry = entry.map_err(|_| Race::Churn)?;
        let name = entry.file_name();
        if name.to_bytes().first() == Some(&b'.') {
            continue;
        }
        match readlinkat_raw(&fd_dir, name, &mut link[..]) {
            // A link one byte longer than the target cannot be it; the
            // buffer is sized so that a match fits exactly.
            Ok(n) if n == target.len() && &link[..n] == target => return Ok(true),
            Ok(_) => {}
            // A descriptor closed between listing and reading: harmless.
            Err(Errno::NOENT) => continue,
            Err(Errno::ACCESS | Errno::PERM) => return Err(Race::Denied),
            Err(Errno::SRCH) => return Err(Race::Gone),
            Err(_) => return Err(Race::Churn),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn finds_exactly_the_holders_of_a_socket() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let inode = {
            use std::os::fd::AsRawFd;
            std::fs::metadata(format!("/proc/self/fd/{}", a.as_raw_fd()))
                .expect("fd")
                .ino()
        };
        let me = std::process::id() as i32;
        let found =
            socket_holders(inode, Some(rustix::process::getuid().as_raw())).expect("census");
        assert_eq!(found.pids, vec![me]);
        let none = socket_holders(u64::MAX - 1, None).expect("census");
        assert!(none.pids.is_empty());
    }
}
