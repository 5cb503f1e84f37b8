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

use clankie_runtime::clients::{Call, INTERNAL};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use clankie_proto::admission::v1 as admission_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::{UnixListener, UnixStream};

use super::{Admitted, admission_refusal};
use crate::Shared;

/// The identity of a process as the kernel names it: the pidfs inode of a
/// pidfd (never reused within a boot) where the kernel has pidfs, else the
/// pid number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    Pidfs(u64),
    Pid(i32),
}

/// Who wrote the bytes read from one Unix connection.
pub struct Writers {
    /// The process that connected (SO_PEERPIDFD, else SO_PEERCRED).
    connected: Identity,
    /// Set once any bytes came from another process, or from a writer the
    /// kernel did not name.
    foreign: AtomicBool,
}

impl Writers {
    fn note(&self, writer: Option<Identity>) {
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
    /// The listener asked for SO_PASSPIDFD and the kernel has pidfs.
    pidfds: bool,
}

// SO_PASSPIDFD (Linux 6.5): each read carries a pidfd of its writer
// (SCM_PIDFD), made by the kernel; unlike SCM_CREDENTIALS, a sender with
// CAP_SYS_ADMIN cannot choose what it names. nix has no wrapper yet; its
// own option macro builds one.
mod passpidfd {
    use nix::{getsockopt_impl, setsockopt_impl, sockopt_impl};
    sockopt_impl!(PassPidfd, Both, libc::SOL_SOCKET, libc::SO_PASSPIDFD, bool);
}
/// The control message type of a pidfd (`SCM_PIDFD`).
const SCM_PIDFD: i32 = 0x04;
/// The most descriptors one `SCM_RIGHTS` message carries (`SCM_MAX_FD`).
const SCM_MAX_FD: usize = 253;
/// `PIDFS_MAGIC`: the filesystem of pidfds that have their own inode.
const PIDFS_MAGIC: i64 = 0x5049_4446;

/// The pidfs identity of a pidfd reachable at `path` (an fd link).
fn pidfs_identity_at(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let fs = nix::sys::statfs::statfs(path).ok()?;
    if fs.filesystem_type().0 as i64 != PIDFS_MAGIC {
        return None;
    }
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// Takes ownership of a descriptor the kernel installed in a control
/// message: reads the pidfs identity it names, then closes it.
fn take_pidfd(raw: i32) -> Option<Identity> {
    let id = pidfs_identity_at(std::path::Path::new(&format!("/proc/self/fd/{raw}")));
    let _ = nix::unistd::close(raw);
    id.map(Identity::Pidfs)
}

/// Reads into `buf` and returns the writer when the kernel named one.
fn recv_with_writer(
    stream: &UnixStream,
    buf: &mut [u8],
    pidfds: bool,
) -> std::io::Result<(usize, Option<Identity>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixCredentials, recvmsg};
    use std::os::fd::AsRawFd;
    let mut iov = [std::io::IoSliceMut::new(buf)];
    // Room for the credentials, the pidfd and the most descriptors one
    // message can carry (SCM_MAX_FD): the control data is never truncated,
    // so every descriptor the kernel installs here is seen, and closed.
    let mut space = nix::cmsg_space!(
        UnixCredentials,
        std::os::fd::RawFd,
        [std::os::fd::RawFd; SCM_MAX_FD]
    );
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    let mut pid = None;
    let mut pidfd = None;
    let mut named = true;
    match msg.cmsgs() {
        Ok(cmsgs) => {
            for c in cmsgs {
                match c {
                    ControlMessageOwned::ScmCredentials(cred) if cred.pid() > 0 => {
                        pid = Some(Identity::Pid(cred.pid()));
                    }
                    ControlMessageOwned::ScmRights(fds) => {
                        // Descriptors sent along are not ours to keep.
                        for fd in fds {
                            let _ = nix::unistd::close(fd);
                        }
                        named = false;
                    }
                    ControlMessageOwned::Unknown(u)
                        if u.cmsg_header.cmsg_level == libc::SOL_SOCKET
                            && u.cmsg_header.cmsg_type == SCM_PIDFD =>
                    {
                        if let Ok(raw) = <[u8; 4]>::try_from(u.data_bytes.as_slice()) {
                            pidfd = take_pidfd(i32::from_ne_bytes(raw));
                        }
                    }
                    _ => {}
                }
            }
        }
        // Truncated control data (descriptors sent along) names no one.
        Err(_) => named = false,
    }
    let writer = if !named {
        None
    } else if pidfds {
        pidfd
    } else {
        pid
    };
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
            let pidfds = this.pidfds;
            match this.inner.try_io(Interest::READABLE, || {
                recv_with_writer(&this.inner, unfilled, pidfds)
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
pub struct CredListener {
    inner: UnixListener,
    /// SO_PASSPIDFD is set: writers are compared by pidfs identity.
    pidfds: bool,
}

impl CredListener {
    /// Sets SO_PASSCRED, and SO_PASSPIDFD where the kernel has it, on the
    /// listening socket itself: accepted sockets inherit them, and a client
    /// writing before its connection is accepted has its credentials
    /// attached too, so no byte goes unnamed.
    pub fn new(listener: UnixListener) -> std::io::Result<Self> {
        use nix::sys::socket::{setsockopt, sockopt::PassCred};
        setsockopt(&listener, PassCred, &true).map_err(std::io::Error::from)?;
        let pidfds = setsockopt(&listener, passpidfd::PassPidfd, &true).is_ok() && own_pidfs();
        if !pidfds {
            tracing::warn!("no SO_PASSPIDFD or pidfs here: local writers are compared by pid");
        }
        Ok(CredListener {
            inner: listener,
            pidfds,
        })
    }
}

/// True when pidfds carry their own pidfs inode here (Linux 6.9+).
fn own_pidfs() -> bool {
    let Ok(me) = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    ) else {
        return false;
    };
    use std::os::fd::AsRawFd as _;
    pidfs_identity_at(std::path::Path::new(&format!(
        "/proc/self/fd/{}",
        me.as_raw_fd()
    )))
    .is_some()
}

/// The identity of the process that connected.
fn connected_identity(stream: &UnixStream, pidfds: bool) -> Identity {
    if pidfds && let Some(id) = pidfs_id(stream) {
        return Identity::Pidfs(id);
    }
    Identity::Pid(stream.peer_cred().ok().and_then(|c| c.pid()).unwrap_or(0))
}

impl axum::serve::Listener for CredListener {
    type Io = CredStream;
    type Addr = tokio::net::unix::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((inner, addr)) => {
                    // SO_PASSCRED and SO_PASSPIDFD are inherited (see new).
                    let writers = Arc::new(Writers {
                        connected: connected_identity(&inner, self.pidfds),
                        foreign: AtomicBool::new(false),
                    });
                    return (
                        CredStream {
                            inner,
                            writers,
                            pidfds: self.pidfds,
                        },
                        addr,
                    );
                }
                Err(e) => {
                    tracing::debug!(error = %e, "local accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// What the kernel said about a connection's peer, and its proof once made.
pub struct PeerState {
    pub pid: i32,
    pub uid: u32,
    /// The pidfs inode of `SO_PEERPIDFD` (0 when the kernel has none).
    pub pidfs_id: u64,
    /// Loopback TCP: the connection's two ends.
    pub tcp: Option<admission_pb::TcpEnds>,
    /// Unix: who wrote what was read.
    pub writers: Option<Arc<Writers>>,
    proof: tokio::sync::Mutex<Option<Admitted>>,
}

/// Per-connection information handed to every request on it.
#[derive(Clone)]
pub struct LocalPeer(pub Arc<PeerState>);

/// The pidfs inode of the peer's SO_PEERPIDFD, when the kernel has pidfs.
fn pidfs_id(stream: &UnixStream) -> Option<u64> {
    use nix::sys::socket::{getsockopt, sockopt::PeerPidfd};
    let fd = getsockopt(stream, PeerPidfd).ok()?;
    let fs = nix::sys::statfs::fstatfs(&fd).ok()?;
    if fs.filesystem_type().0 as i64 != PIDFS_MAGIC {
        return None;
    }
    nix::sys::stat::fstat(&fd).ok().map(|st| st.st_ino)
}

impl LocalPeer {
    /// Who a Unix connection counts against before it proves anything: the
    /// process the kernel named (its pidfs id, else its pid), never the
    /// address every local client shares.
    pub fn key(&self) -> crate::serve::PeerKey {
        let p = &self.0;
        crate::serve::PeerKey::Process(if p.pidfs_id != 0 {
            p.pidfs_id
        } else {
            u64::from(p.pid.unsigned_abs())
        })
    }

    /// What the kernel says about a Unix connection's peer.
    pub fn unix(io: &CredStream) -> Self {
        let (pid, uid) = io
            .inner
            .peer_cred()
            .map(|c| (c.pid().unwrap_or(0), c.uid()))
            .unwrap_or((0, u32::MAX));
        LocalPeer(Arc::new(PeerState {
            pid,
            uid,
            pidfs_id: pidfs_id(&io.inner).unwrap_or(0),
            tcp: None,
            writers: Some(io.writers.clone()),
            proof: tokio::sync::Mutex::new(None),
        }))
    }

    /// A loopback TCP connection's two ends, for the owner lookup.
    pub fn tcp(io: &tokio::net::TcpStream, client: std::net::SocketAddr) -> Self {
        let server = io.local_addr().ok();
        LocalPeer(Arc::new(PeerState {
            pid: 0,
            uid: u32::MAX,
            pidfs_id: 0,
            tcp: server.map(|server| admission_pb::TcpEnds {
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

impl PeerState {
    fn foreign_writer(&self) -> bool {
        self.writers.as_ref().is_some_and(|w| w.foreign())
    }

    fn prove_request(&self) -> admission_pb::ProveLocalRequest {
        admission_pb::ProveLocalRequest {
            pid: self.pid,
            uid: self.uid,
            pidfs_id: self.pidfs_id,
            tcp: self.tcp.clone(),
            foreign_writer: self.foreign_writer(),
        }
    }
}

async fn prove(shared: &Shared, state: &PeerState) -> Result<Admitted, ClankieError> {
    let req = Call::new(state.prove_request()).timeout(INTERNAL).request();
    let resp = shared
        .admission
        .clone()
        .prove_local(req)
        .await
        .map_err(|s| {
            admission_refusal(
                &s,
                "local fleet proof is unavailable right now; nothing was forwarded, retry shortly",
            )
        })?;
    Ok(Admitted::from_admission(resp.into_inner()))
}

/// What a local door knows before a request's body is read.
pub(crate) enum Knock {
    /// Proven in full just now.
    Proven(Admitted),
    /// The connection's earlier proof, not yet rechecked for this request:
    /// [`confirm`] settles it once the body is read.
    Held(Admitted),
}

/// Admits one request on a local connection: a connection without a proof
/// is proven in full; one with a proof is rechecked once its body is read
/// ([`confirm`]).
pub(crate) async fn admit(shared: &Shared, peer: &LocalPeer) -> Result<Knock, ClankieError> {
    let state = &peer.0;
    if state.tcp.is_none() && state.pid <= 0 {
        return Err(ErrorCode::LocalProcessMembershipRequired
            .err("the kernel did not name this connection's peer"));
    }
    let mut slot = state.proof.lock().await;
    if state.foreign_writer() {
        // Admission refuses and counts it; the proof is gone for good.
        *slot = None;
        return prove(shared, state).await.map(Knock::Proven);
    }
    if let Some(proof) = slot.as_ref() {
        return Ok(Knock::Held(proof.clone()));
    }
    let a = prove(shared, state).await?;
    *slot = Some(a.clone());
    Ok(Knock::Proven(a))
}

/// Settles a held proof for a request whose body was read: admission's
/// recheck, or, when the mailbox proves the request's seat fresh itself
/// (`crate::observed`), only the ticket's lookup. A ticket that
/// fails either is discarded and the connection proven again in full.
pub(crate) async fn confirm(
    shared: &Shared,
    peer: &LocalPeer,
    held: Admitted,
    by_mailbox: bool,
) -> Result<Admitted, ClankieError> {
    let mut slot = peer.0.proof.lock().await;
    let req = Call::new(admission_pb::RecheckRequest {
        ticket: held.ticket.clone(),
    })
    .timeout(INTERNAL)
    .request();
    let mut admission = shared.admission.clone();
    let answer = if by_mailbox {
        admission.ticket_principal(req).await
    } else {
        admission.recheck(req).await
    };
    if let Ok(resp) = answer {
        let resp = resp.into_inner();
        let mut a = held;
        a.tools_on = super::tools_on(resp.settings.as_ref());
        return Ok(a);
    }
    // Any failed recheck discards the proof and runs the full one.
    *slot = None;
    let a = prove(shared, &peer.0).await?;
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
