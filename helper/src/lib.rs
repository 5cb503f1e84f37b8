//! The census helper's library: the job handlers, and the `sys`, `census`
//! and `diag` modules that read kernel facts. The pipe's frame codec and
//! bounds are in `clankie_types::helper`, shared with admission.
//!
//! Owns: fresh observations of processes and socket holders, one job at a
//! time, with no state carried between jobs. Does not own: any admission
//! decision, cache or listener.

// The kernel facts read here are Linux's. The macOS path (libproc) keeps
// the same seams and is described in docs/ARCHITECTURE.md ("macOS"); until
// it is built, other targets stop here rather than build a helper that
// cannot observe anything.
#[cfg(not(target_os = "linux"))]
compile_error!(
    "clankie-helper reads Linux kernel facts; the macOS (libproc) path is not built yet: see docs/ARCHITECTURE.md"
);

pub mod census;
pub mod diag;
pub mod sys;

use clankie_proto::helper::v1 as helper_pb;
use clankie_types::helper::MAX_REPLY;
use helper_pb::Reason;

/// Answers one request with fresh observations.
pub fn handle(req: helper_pb::Request) -> helper_pb::Reply {
    use helper_pb::reply::Result as R;
    use helper_pb::request::Job;
    let result = match req.job {
        Some(Job::Ping(_)) => R::Pong(helper_pb::Pong {
            version: env!("CARGO_PKG_VERSION").into(),
        }),
        Some(Job::Observe(o)) => observe(&o),
        Some(Job::SocketHolders(s)) => match census::socket_holders(s.inode, s.uid) {
            Ok(h) => R::Holders(holders_pb(h)),
            Err(reason) => error(reason, 0),
        },
        Some(Job::LoopbackHolders(l)) => loopback(&l),
        None => error(Reason::UnknownJob, 0),
    };
    let mut reply = helper_pb::Reply {
        id: req.id,
        result: Some(result),
    };
    if prost::Message::encoded_len(&reply) > MAX_REPLY {
        reply.result = Some(error(Reason::ReplyTooLarge, 0));
    }
    reply
}

fn error(reason: Reason, errno: i32) -> helper_pb::reply::Result {
    helper_pb::reply::Result::Error(helper_pb::HelperError {
        reason: reason.into(),
        errno,
    })
}

fn holders_pb(h: census::Holders) -> helper_pb::SocketHolders {
    helper_pb::SocketHolders {
        pids: h.pids,
        attempts: h.attempts,
        unreadable: h.unreadable,
        privileged: h.privileged,
    }
}

/// sock_diag names the client socket of a loopback connection; the census
/// (over that socket's uid, as the seed's same-user census) names its holders.
fn loopback(l: &helper_pb::FindLoopbackHolders) -> helper_pb::reply::Result {
    let end = |ip: &str, port: u32| -> Option<std::net::SocketAddr> {
        Some(std::net::SocketAddr::new(
            ip.parse().ok()?,
            u16::try_from(port).ok()?,
        ))
    };
    let (Some(client), Some(server)) = (
        end(&l.client_ip, l.client_port),
        end(&l.server_ip, l.server_port),
    ) else {
        return error(Reason::BadAddress, 0);
    };
    let socket = match diag::tcp_client_socket(client, server) {
        Ok(s) => s,
        Err(e) => {
            let errno = if let diag::DiagError::Io(n) = e { n } else { 0 };
            return error(e.reason(), errno);
        }
    };
    let holders = match census::socket_holders(socket.inode, Some(socket.uid)) {
        Ok(h) => h,
        Err(reason) => return error(reason, 0),
    };
    let lineage = match holders.pids.as_slice() {
        [pid] if holders.unreadable == 0 => match bound_lineage(*pid, socket.inode) {
            Ok(l) => l,
            Err(e) => return error(e.reason(), e.errno()),
        },
        _ => Vec::new(),
    };
    helper_pb::reply::Result::Loopback(helper_pb::LoopbackHolders {
        inode: socket.inode,
        uid: socket.uid,
        holders: Some(holders_pb(holders)),
        lineage,
    })
}

/// The census's one holder, bound to the socket (its descriptors read again
/// while its pidfd is open), then its ancestry. Empty when the holder no
/// longer holds the socket or has gone: the census's answer is stale, and
/// admission refuses rather than prove whoever has the pid now.
fn bound_lineage(pid: i32, inode: u64) -> Result<Vec<helper_pb::ProcessFact>, sys::ObsError> {
    let (holder, held) = match sys::observe_holding(pid, || census::holds_socket(pid, inode)) {
        Ok(found) => found,
        Err(sys::ObsError::Gone) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    if !held || holder.exited {
        return Ok(Vec::new());
    }
    let mut facts = Vec::new();
    let mut seen = std::collections::HashSet::from([pid]);
    let parent = holder.ppid;
    facts.push(holder.into());
    ancestry(parent, true, sys::observe, &mut seen, &mut facts)?;
    // The same bound as an observation's walk: the process and 64 hops.
    facts.truncate(65);
    Ok(facts)
}

fn observe(o: &helper_pb::ObserveProcesses) -> helper_pb::reply::Result {
    use helper_pb::reply::Result as R;
    if o.pids.len() > 256 {
        return error(Reason::TooManyPids, 0);
    }
    let mut facts = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &pid in &o.pids {
        let read = if o.identity_only {
            sys::observe_identity
        } else {
            sys::observe
        };
        if let Err(e) = ancestry(pid, o.with_ancestry, read, &mut seen, &mut facts) {
            return error(e.reason(), e.errno());
        }
    }
    R::Observation(helper_pb::Observation { processes: facts })
}

/// Observes `pid` and, with `up`, its parents to init (at most 64 hops,
/// each process once). A process gone mid-walk is recorded as exited and
/// ends the walk; any other failure ends the job.
fn ancestry(
    pid: i32,
    up: bool,
    read: fn(i32) -> Result<sys::Fact, sys::ObsError>,
    seen: &mut std::collections::HashSet<i32>,
    facts: &mut Vec<helper_pb::ProcessFact>,
) -> Result<(), sys::ObsError> {
    let mut next = Some(pid);
    let mut hops = 0;
    while let Some(p) = next {
        if p <= 0 || !seen.insert(p) || hops > 64 {
            break;
        }
        hops += 1;
        match read(p) {
            Ok(f) => {
                next = (up && f.ppid > 0).then_some(f.ppid);
                facts.push(f.into());
            }
            Err(e) => {
                facts.push(helper_pb::ProcessFact {
                    pid: p,
                    exited: matches!(e, sys::ObsError::Gone),
                    ..Default::default()
                });
                if !matches!(e, sys::ObsError::Gone) {
                    return Err(e);
                }
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn inode_of(fd: &impl std::os::fd::AsRawFd) -> u64 {
        std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .expect("fd")
            .ino()
    }

    #[test]
    fn a_bound_holder_starts_its_lineage_and_a_process_without_the_socket_gets_none() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let inode = inode_of(&a);
        let me = std::process::id() as i32;
        let lineage = bound_lineage(me, inode).expect("observe");
        let holder = lineage.first().expect("the holder is bound");
        assert_eq!(holder.pid, me);
        assert!(holder.pidfs_id > 0 || holder.start_time > 0);
        assert!(lineage.len() >= 2, "the holder's parents follow it");
        assert!(lineage.iter().skip(1).any(|f| f.pid == holder.ppid));
        // A live process that does not hold the socket: a census naming it
        // (a pid reused after the census) binds nothing.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn");
        let stranger = bound_lineage(other.id() as i32, inode).expect("observe");
        other.kill().expect("kill");
        other.wait().expect("reap");
        assert!(stranger.is_empty());
        // A pid with no process behind it binds nothing either.
        assert!(
            bound_lineage(other.id() as i32, inode)
                .expect("gone")
                .is_empty()
        );
    }
}
