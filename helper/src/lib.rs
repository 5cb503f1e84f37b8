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

use clankie_proto::helper::v1 as pb;
use clankie_types::helper::MAX_REPLY;
use pb::Reason;

/// Answers one request with fresh observations.
pub fn handle(req: pb::Request) -> pb::Reply {
    use pb::reply::Result as R;
    use pb::request::Job;
    let result = match req.job {
        Some(Job::Ping(_)) => R::Pong(pb::Pong {
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
    let mut reply = pb::Reply {
        id: req.id,
        result: Some(result),
    };
    if prost::Message::encoded_len(&reply) > MAX_REPLY {
        reply.result = Some(error(Reason::ReplyTooLarge, 0));
    }
    reply
}

fn error(reason: Reason, errno: i32) -> pb::reply::Result {
    pb::reply::Result::Error(pb::HelperError {
        reason: reason.into(),
        errno,
    })
}

fn holders_pb(h: census::Holders) -> pb::SocketHolders {
    pb::SocketHolders {
        pids: h.pids,
        attempts: h.attempts,
        unreadable: h.unreadable,
        privileged: h.privileged,
    }
}

/// sock_diag names the client socket of a loopback connection; the census
/// (over that socket's uid, as the seed's same-user census) names its holders.
fn loopback(l: &pb::FindLoopbackHolders) -> pb::reply::Result {
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
    match census::socket_holders(socket.inode, Some(socket.uid)) {
        Ok(h) => pb::reply::Result::Loopback(pb::LoopbackHolders {
            inode: socket.inode,
            uid: socket.uid,
            holders: Some(holders_pb(h)),
        }),
        Err(reason) => error(reason, 0),
    }
}

fn observe(o: &pb::ObserveProcesses) -> pb::reply::Result {
    use pb::reply::Result as R;
    if o.pids.len() > 256 {
        return error(Reason::TooManyPids, 0);
    }
    let mut facts = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &pid in &o.pids {
        let mut next = Some(pid);
        let mut hops = 0;
        while let Some(p) = next {
            if p <= 0 || !seen.insert(p) || hops > 64 {
                break;
            }
            hops += 1;
            match sys::observe(p) {
                Ok(f) => {
                    next = (o.with_ancestry && f.ppid > 0).then_some(f.ppid);
                    facts.push(f.into());
                }
                Err(e) => {
                    facts.push(pb::ProcessFact {
                        pid: p,
                        exited: matches!(e, sys::ObsError::Gone),
                        ..Default::default()
                    });
                    if !matches!(e, sys::ObsError::Gone) {
                        return error(e.reason(), e.errno());
                    }
                    break;
                }
            }
        }
    }
    R::Observation(pb::Observation { processes: facts })
}
