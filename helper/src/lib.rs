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
    match census::socket_holders(socket.inode, Some(socket.uid)) {
        Ok(h) => helper_pb::reply::Result::Loopback(helper_pb::LoopbackHolders {
            inode: socket.inode,
            uid: socket.uid,
            holders: Some(holders_pb(h)),
        }),
        Err(reason) => error(reason, 0),
    }
}

fn observe(o: &helper_pb::ObserveProcesses) -> helper_pb::reply::Result {
    use helper_pb::reply::Result as R;
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
                    facts.push(helper_pb::ProcessFact {
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
    R::Observation(helper_pb::Observation { processes: facts })
}
