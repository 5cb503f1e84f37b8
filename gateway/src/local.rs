//! The gateway's local listener: MCP over HTTP on a Unix socket, where the
//! kernel names each connection's peer and admission proves it is a process
//! inside a pane of a linked session.
//!
//! The proof is bound to its connection: the first request runs the full
//! proof (`ProveLocal`); later requests reuse it after admission's cheap
//! recheck; a failed recheck discards it and proves again.
//!
//! Residual (as in the seed): the kernel names the process that connected. A
//! descriptor that process hands to another process after the proof (a
//! forked child, SCM_RIGHTS) is used under the original proof until the
//! connection is proven again; that equals the member proxying for another
//! process, which the fleet boundary already accepts. `SO_PASSPIDFD` on every
//! read would close this and is not done yet.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use clankie_proto::admission::v1 as apb;
use clankie_proto::common::v1::FleetTools;
use clankie_runtime::{ClankieError, ErrorCode};
use tokio::net::UnixListener;

use crate::{Admitted, Shared};

/// What the kernel said about a connection's peer, and its proof once made.
pub struct PeerState {
    pub pid: i32,
    pub uid: u32,
    /// The pidfs inode of `SO_PEERPIDFD` (0 when the kernel has none).
    pub pidfs_id: u64,
    proof: tokio::sync::Mutex<Option<Admitted>>,
}

/// Per-connection information handed to every request on it.
#[derive(Clone)]
pub struct LocalPeer(pub Arc<PeerState>);

fn pidfs_id(stream: &tokio::net::UnixStream) -> u64 {
    use nix::sys::socket::{getsockopt, sockopt::PeerPidfd};
    getsockopt(stream, PeerPidfd)
        .ok()
        .and_then(|fd| nix::sys::stat::fstat(&fd).ok())
        .map(|st| st.st_ino)
        .unwrap_or(0)
}

impl Connected<IncomingStream<'_, UnixListener>> for LocalPeer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        let io = stream.io();
        let (pid, uid) = io
            .peer_cred()
            .map(|c| (c.pid().unwrap_or(0), c.uid()))
            .unwrap_or((0, u32::MAX));
        LocalPeer(Arc::new(PeerState {
            pid,
            uid,
            pidfs_id: pidfs_id(io),
            proof: tokio::sync::Mutex::new(None),
        }))
    }
}

fn admitted(resp: apb::AdmitResponse) -> Admitted {
    Admitted {
        tools_on: resp
            .settings
            .as_ref()
            .is_some_and(|s| s.tools == FleetTools::Connected as i32),
        ticket: resp.ticket,
        principal: resp.principal.unwrap_or_default(),
    }
}

fn unavailable(status: &tonic::Status) -> ClankieError {
    let e = ClankieError::from_status(status);
    if status
        .metadata()
        .contains_key(clankie_runtime::code::REASON_KEY)
    {
        e
    } else {
        ErrorCode::FleetAdmissionUnavailable
            .err("local fleet proof is unavailable right now; nothing was forwarded, retry shortly")
    }
}

/// Admits one request on a local connection.
pub(crate) async fn admit(shared: &Shared, peer: &LocalPeer) -> Result<Admitted, ClankieError> {
    let state = &peer.0;
    if state.pid <= 0 {
        return Err(ErrorCode::LocalProcessMembershipRequired
            .err("the kernel did not name this connection's peer"));
    }
    let mut slot = state.proof.lock().await;
    if let Some(proof) = slot.as_ref() {
        let mut req = tonic::Request::new(apb::RecheckRequest {
            ticket: proof.ticket.clone(),
        });
        req.set_timeout(Duration::from_secs(5));
        match shared.admission.clone().recheck(req).await {
            Ok(resp) => {
                let resp = resp.into_inner();
                let mut a = proof.clone();
                a.tools_on = resp
                    .settings
                    .is_some_and(|s| s.tools == FleetTools::Connected as i32);
                return Ok(a);
            }
            // Any failed recheck discards the proof and runs the full one.
            Err(_) => *slot = None,
        }
    }
    let mut req = tonic::Request::new(apb::ProveLocalRequest {
        pid: state.pid,
        uid: state.uid,
        pidfs_id: state.pidfs_id,
    });
    req.set_timeout(Duration::from_secs(5));
    let resp = shared
        .admission
        .clone()
        .prove_local(req)
        .await
        .map_err(|s| unavailable(&s))?;
    let a = admitted(resp.into_inner());
    *slot = Some(a.clone());
    Ok(a)
}
