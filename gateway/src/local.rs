//! The gateway's local listener: MCP over HTTP on a Unix socket, where the
//! kernel names each connection's peer and admission proves it is a process
//! inside a pane of a linked session.
//!
//! The proof is bound to its connection: the first request runs the full
//! proof (`ProveLocal`); later requests reuse it after admission's cheap
//! recheck; a failed recheck discards it and proves again.
//!
//! Two local listeners:
//! - the Unix socket (primary): the kernel names the peer (SO_PEERCRED,
//!   SO_PEERPIDFD) and, with SO_PASSCRED, the writer of every byte read;
//! - loopback TCP, for clients that cannot speak to a Unix socket: admission
//!   finds the client socket by sock_diag and its one holder by a census.
//!
//! Shared descriptors: a TCP proof that sees a second holder refuses, as in
//! the seed. On the Unix socket we go further: every read carries its
//! writer's credentials, and bytes written by any process other than the one
//! that connected (a forked child, a process handed the descriptor by
//! SCM_RIGHTS, before or after the proof) discard the proof and refuse the
//! request as `shared_descriptor`. The residual: a process that shares the
//! descriptor but only reads sees replies to the member's own requests, which
//! equals the member proxying for it; over TCP, a descriptor handed on after
//! the proof is unseen until the connection is proven again (the seed's
//! accepted cost).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use clankie_proto::admission::v1 as apb;
use clankie_proto::common::v1::FleetTools;
use clankie_runtime::{ClankieError, ErrorCode};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{TcpListener, UnixListener, UnixStream};

use crate::{Admitted, Shared};

/// Who wrote the bytes read from one Unix connection.
pub struct Writers {
    /// The process that connected (SO_PEERCRED).
    connected: i32,
    /// Set once any bytes came from another process, or from a writer the
    /// kernel did not name.
    foreign: AtomicBool,
}

impl Writers {
    fn note(&self, writer: Option<i32>) {
        if writer != Some(self.connected) {
            self.foreign.store(true, Ordering::SeqCst);
        }
    }

    pub fn foreign(&self) -> bool {
        self.foreign.load(Ordering::SeqCst)
    }
}

/// A Unix connection whose every read also takes the writer's credentials.
pub struct CredStream {
    inner: UnixStream,
    writers: Arc<Writers>,
}

/// Reads into `buf` and returns the writer's pid when the kernel named one.
fn recv_with_writer(stream: &UnixStream, buf: &mut [u8]) -> std::io::Result<(usize, Option<i32>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixCredentials, recvmsg};
    use std::os::fd::AsRawFd;
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!(UnixCredentials);
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    let mut writer = None;
    // Truncated control data (descriptors sent along) names no one.
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmCredentials(cred) = c
                && cred.pid() > 0
            {
                writer = Some(cred.pid());
            }
        }
    }
    Ok((msg.bytes, writer))
}

impl AsyncRead for CredStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.inner.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match this.inner.try_io(Interest::READABLE, || {
                recv_with_writer(&this.inner, unfilled)
            }) {
                Ok((n, writer)) => {
                    if n > 0 {
                        this.writers.note(writer);
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for CredStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The local Unix listener: every connection takes writer credentials.
pub struct CredListener(UnixListener);

impl CredListener {
    /// Sets SO_PASSCRED on the listening socket itself: accepted sockets
    /// inherit it, and a client writing before its connection is accepted
    /// has its credentials attached too, so no byte goes unnamed.
    pub fn new(listener: UnixListener) -> std::io::Result<Self> {
        use nix::sys::socket::{setsockopt, sockopt::PassCred};
        setsockopt(&listener, PassCred, &true).map_err(std::io::Error::from)?;
        Ok(CredListener(listener))
    }
}

impl axum::serve::Listener for CredListener {
    type Io = CredStream;
    type Addr = tokio::net::unix::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((inner, addr)) => {
                    // SO_PASSCRED is inherited from the listener (see new).
                    let connected = inner.peer_cred().ok().and_then(|c| c.pid()).unwrap_or(0);
                    let writers = Arc::new(Writers {
                        connected,
                        foreign: AtomicBool::new(false),
                    });
                    return (CredStream { inner, writers }, addr);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "local accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// What the kernel said about a connection's peer, and its proof once made.
pub struct PeerState {
    pub pid: i32,
    pub uid: u32,
    /// The pidfs inode of `SO_PEERPIDFD` (0 when the kernel has none).
    pub pidfs_id: u64,
    /// Loopback TCP: the connection's two ends.
    pub tcp: Option<apb::TcpEnds>,
    /// Unix: who wrote what was read.
    pub writers: Option<Arc<Writers>>,
    proof: tokio::sync::Mutex<Option<Admitted>>,
}

/// Per-connection information handed to every request on it.
#[derive(Clone)]
pub struct LocalPeer(pub Arc<PeerState>);

fn pidfs_id(stream: &UnixStream) -> u64 {
    use nix::sys::socket::{getsockopt, sockopt::PeerPidfd};
    getsockopt(stream, PeerPidfd)
        .ok()
        .and_then(|fd| nix::sys::stat::fstat(&fd).ok())
        .map(|st| st.st_ino)
        .unwrap_or(0)
}

impl Connected<IncomingStream<'_, CredListener>> for LocalPeer {
    fn connect_info(stream: IncomingStream<'_, CredListener>) -> Self {
        let io = stream.io();
        let (pid, uid) = io
            .inner
            .peer_cred()
            .map(|c| (c.pid().unwrap_or(0), c.uid()))
            .unwrap_or((0, u32::MAX));
        LocalPeer(Arc::new(PeerState {
            pid,
            uid,
            pidfs_id: pidfs_id(&io.inner),
            tcp: None,
            writers: Some(io.writers.clone()),
            proof: tokio::sync::Mutex::new(None),
        }))
    }
}

impl Connected<IncomingStream<'_, TcpListener>> for LocalPeer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        let client = *stream.remote_addr();
        let server = stream.io().local_addr().ok();
        LocalPeer(Arc::new(PeerState {
            pid: 0,
            uid: u32::MAX,
            pidfs_id: 0,
            tcp: server.map(|server| apb::TcpEnds {
                client_ip: client.ip().to_string(),
                client_port: u32::from(client.port()),
                server_ip: server.ip().to_string(),
                server_port: u32::from(server.port()),
            }),
            writers: None,
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

impl PeerState {
    fn foreign_writer(&self) -> bool {
        self.writers.as_ref().is_some_and(|w| w.foreign())
    }

    fn prove_request(&self) -> apb::ProveLocalRequest {
        apb::ProveLocalRequest {
            pid: self.pid,
            uid: self.uid,
            pidfs_id: self.pidfs_id,
            tcp: self.tcp.clone(),
            foreign_writer: self.foreign_writer(),
        }
    }
}

async fn prove(shared: &Shared, state: &PeerState) -> Result<Admitted, ClankieError> {
    let mut req = tonic::Request::new(state.prove_request());
    req.set_timeout(Duration::from_secs(5));
    let resp = shared
        .admission
        .clone()
        .prove_local(req)
        .await
        .map_err(|s| unavailable(&s))?;
    Ok(admitted(resp.into_inner()))
}

/// Admits one request on a local connection.
pub(crate) async fn admit(shared: &Shared, peer: &LocalPeer) -> Result<Admitted, ClankieError> {
    let state = &peer.0;
    if state.tcp.is_none() && state.pid <= 0 {
        return Err(ErrorCode::LocalProcessMembershipRequired
            .err("the kernel did not name this connection's peer"));
    }
    let mut slot = state.proof.lock().await;
    if state.foreign_writer() {
        // Admission refuses and counts it; the proof is gone for good.
        *slot = None;
        return prove(shared, state).await;
    }
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
    let a = prove(shared, state).await?;
    *slot = Some(a.clone());
    Ok(a)
}

/// After a request's body was read: every byte of it must have come from
/// the process that connected.
pub(crate) async fn check_writers(shared: &Shared, peer: &LocalPeer) -> Result<(), ClankieError> {
    let state = &peer.0;
    if !state.foreign_writer() {
        return Ok(());
    }
    *state.proof.lock().await = None;
    prove(shared, state).await.map(|_| ())
}
