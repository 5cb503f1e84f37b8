//! Who is on the other end of an internal socket, read from kernel facts.
//!
//! An internal gRPC socket serves its own stack. At accept the kernel names
//! the peer (`SO_PEERCRED`, `SO_PEERPIDFD`); from `/proc` we read its parent,
//! its executable and its cgroup. The peer is one of the stack's services
//! when all of these hold:
//!
//! - it runs as our user;
//! - its executable is `clankie-<service>` from the folder our own
//!   executable came from (a binary replaced on disk since it started still
//!   counts: it is the same file name, and the parent rule below holds);
//! - it is our sibling under the stack's supervisor: a direct child of the
//!   `clankie up` that started us (`CLANKIE_PARENT_PID`, which must still be
//!   our own parent), in our own cgroup (under systemd: the stack's unit);
//! - it is still alive after those reads (its pidfd has not signalled
//!   exit), so the pid we read about was never reused in between.
//!
//! Anything else is [`Caller::Other`]: it may still act for the owner by
//! presenting the owner credential, request by request. The parent rule is
//! what keeps a hostile process from running one of our binaries as its
//! own child (and driving it under ptrace, or with `LD_PRELOAD`): only the
//! supervisor starts children that count. For the same reason a service
//! manager is never the supervisor: systemd adopts orphans, so "a child of
//! the manager" is something any process can become. Under systemd, the
//! unit runs `clankie up` (`deploy/clankie.service`). A supervisor that is
//! pid 1 (a container's init) adopts orphans too and is refused: run
//! `clankie up` under an init.

use std::path::{Path, PathBuf};

/// Who connected to an internal socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalPeer {
    /// A service process of this stack (`admission`, `gateway`, ...).
    Stack(&'static str),
    /// Any other process that presented the owner credential.
    Owner,
    /// Anyone else: refused before any handler runs.
    Other,
}

/// How this process recognises its siblings.
#[derive(Debug, Clone)]
pub struct StackRule {
    bin_dir: Option<PathBuf>,
    uid: u32,
    membership: Membership,
}

#[derive(Debug, Clone)]
enum Membership {
    /// Started by `clankie up`: siblings are the supervisor's children, in
    /// our cgroup (when the kernel has a unified one).
    Supervised {
        supervisor: i32,
        cgroup: Option<String>,
    },
    /// Started any other way: no process counts as the stack.
    Alone,
}

impl StackRule {
    /// The rule for this process, from how it was started.
    pub fn current() -> StackRule {
        let bin_dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        let parent = nix::unistd::getppid().as_raw();
        let supervisor = std::env::var("CLANKIE_PARENT_PID")
            .ok()
            .and_then(|p| p.parse::<i32>().ok());
        let membership = match supervisor {
            Some(s) if s == parent && s > 1 => Membership::Supervised {
                supervisor: s,
                cgroup: own_cgroup(),
            },
            _ => Membership::Alone,
        };
        StackRule {
            bin_dir,
            uid: nix::unistd::geteuid().as_raw(),
            membership,
        }
    }

    /// Classifies the peer of an accepted connection.
    pub fn classify(&self, stream: &tokio::net::UnixStream) -> InternalPeer {
        let Ok(cred) = stream.peer_cred() else {
            return InternalPeer::Other;
        };
        let Some(pid) = cred.pid().filter(|p| *p > 0) else {
            return InternalPeer::Other;
        };
        if cred.uid() != self.uid {
            return InternalPeer::Other;
        }
        let pidfd = match peer_pidfd(stream) {
            Pidfd::Held(fd) => Some(fd),
            Pidfd::Unsupported => None,
            // The peer is already gone (or the kernel would not say): a
            // pid read about now could be someone else's.
            Pidfd::Failed => return InternalPeer::Other,
        };
        // Every fact is read, and liveness checked, whatever the answer.
        let facts = Facts::read(pid);
        let service = facts.as_ref().and_then(|f| self.service_of(f));
        let alive = still_alive(pid, pidfd.as_ref(), facts.map(|f| f.start_time));
        match service {
            Some(name) if alive => InternalPeer::Stack(name),
            _ => InternalPeer::Other,
        }
    }

    /// The service a process runs as, when it is one of our siblings.
    fn service_of(&self, facts: &Facts) -> Option<&'static str> {
        let sibling = match &self.membership {
            Membership::Supervised { supervisor, cgroup } => {
                facts.ppid == *supervisor
                    && nix::unistd::getppid().as_raw() == *supervisor
                    && (cgroup.is_none() || facts.cgroup == *cgroup)
            }
            Membership::Alone => false,
        };
        let dir = self.bin_dir.as_deref()?;
        let name = facts
            .exe
            .file_name()
            .and_then(|f| f.to_str())
            .and_then(|f| f.strip_prefix("clankie-"))
            .and_then(crate::Service::from_name)
            .map(crate::Service::name);
        name.filter(|_| sibling && facts.exe.parent() == Some(dir))
    }
}

/// What `/proc` says about one process.
struct Facts {
    ppid: i32,
    start_time: u64,
    exe: PathBuf,
    cgroup: Option<String>,
}

impl Facts {
    fn read(pid: i32) -> Option<Facts> {
        let (ppid, start_time) = stat(pid)?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
        // A binary replaced on disk since it started reads as "... (deleted)".
        let exe = match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
            Some(s) => PathBuf::from(s),
            None => exe,
        };
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|t| unified_cgroup(&t));
        Some(Facts {
            ppid,
            start_time,
            exe,
            cgroup,
        })
    }
}

/// Parent pid and start time from `/proc/PID/stat`. The command name may
/// hold spaces and parentheses, so fields are counted after the last `)`.
fn stat(pid: i32) -> Option<(i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... starttime(19).
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// This process's start time, in the census's unit (clock ticks since boot
/// on Linux), so a service can tell a process that started before it. None
/// where the fact is missing: unknown, never guessed.
pub fn own_start_time() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        stat(i32::try_from(std::process::id()).ok()?).map(|(_, start)| start)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Another process's start time, in the same unit; None when it is gone
/// (or the fact is missing).
pub fn start_time_of(pid: i32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        stat(pid).map(|(_, start)| start)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// The cgroup v2 path (`0::/path`) from a `/proc/PID/cgroup` text.
fn unified_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_string())
}

fn own_cgroup() -> Option<String> {
    unified_cgroup(&std::fs::read_to_string("/proc/self/cgroup").ok()?)
}

/// What `SO_PEERPIDFD` said.
enum Pidfd {
    Held(std::os::fd::OwnedFd),
    /// The kernel has no such option (before 6.5).
    Unsupported,
    /// Any other failure, such as a peer that already exited.
    Failed,
}

#[cfg(target_os = "linux")]
fn peer_pidfd(stream: &tokio::net::UnixStream) -> Pidfd {
    match nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerPidfd) {
        Ok(fd) => Pidfd::Held(fd),
        Err(nix::errno::Errno::ENOPROTOOPT) => Pidfd::Unsupported,
        Err(_) => Pidfd::Failed,
    }
}

#[cfg(not(target_os = "linux"))]
fn peer_pidfd(_stream: &tokio::net::UnixStream) -> Pidfd {
    Pidfd::Unsupported
}

/// True when the process behind `pid` is the one that connected and it
/// has not exited: its pidfd is not readable. Without a pidfd (kernels
/// before 6.5) the start time is read again and must equal `read_start`,
/// the one read with the other facts.
fn still_alive(pid: i32, pidfd: Option<&std::os::fd::OwnedFd>, read_start: Option<u64>) -> bool {
    use std::os::fd::AsFd;
    match pidfd {
        Some(fd) => {
            let mut fds = [nix::poll::PollFd::new(
                fd.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            matches!(
                nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO),
                Ok(0)
            )
        }
        None => {
            // Without a pidfd we can only show the pid kept its process
            // across our reads; the parent rule covers the rest.
            read_start.is_some() && read_start == stat(pid).map(|s| s.1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let me = std::process::id() as i32;
        let (ppid, start) = stat(me).expect("own stat");
        assert_eq!(ppid, nix::unistd::getppid().as_raw());
        assert!(start > 0);
    }

    #[test]
    fn unified_cgroup_reads_the_v2_line() {
        assert_eq!(
            unified_cgroup("1:cpu:/x\n0::/user.slice/clankie.service\n").as_deref(),
            Some("/user.slice/clankie.service")
        );
        assert_eq!(unified_cgroup("1:cpu:/x\n"), None);
    }

    #[tokio::test]
    async fn a_process_started_by_hand_is_not_the_stack() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let client = tokio::net::UnixStream::connect(&path);
        let (accepted, _client) = tokio::join!(listener.accept(), client);
        let (server, _) = accepted.expect("accept");
        // The test runner is not a child of a clankie supervisor, and its
        // executable is no service binary.
        assert_eq!(StackRule::current().classify(&server), InternalPeer::Other);
    }
}
