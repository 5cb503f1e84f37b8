//! The relay's TLS listener: each connection's handshake runs on its own
//! (bounded in number and in time, so a slow or silent peer holds no one
//! else up), and a finished one goes to the gRPC server with the
//! fingerprint of the certificate its peer proved.
//!
//! Any key gets through the handshake (which machine it is, if any, is
//! decided after), so what one peer may hold is bounded before that: at
//! most [`MAX_PER_PEER`] sockets per address, handshaking or not, and
//! [`MAX_CONNECTIONS`] in all; a few HTTP/2 streams per connection, kept
//! alive by pings; messages of at most [`MAX_MESSAGE`].

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use clankie_proto::relay::v1::relay_server::RelayServer;
use clankie_runtime::relay_tls::{self, Identity};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Connected;

use super::{MachineKey, RelayFace};
use crate::Shared;

/// How long a connection has to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Most handshakes in progress at once; past it a new connection is closed.
const MAX_HANDSHAKES: usize = 64;
/// Most sockets one address holds (a machine needs one, two while it
/// enrols or reconnects).
const MAX_PER_PEER: usize = 8;
/// Most sockets the listener holds.
const MAX_CONNECTIONS: usize = 1024;
/// Most concurrent HTTP/2 streams on one connection (the link, an enrol).
const MAX_STREAMS: u32 = 4;
/// Largest message either way; a relayed answer past it is refused alone
/// (`link.rs`), never sent to tear the link down.
pub(crate) const MAX_MESSAGE: usize = 4 << 20;
/// How long the stop waits for streams to end before it ends them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The sockets held, by address and in all.
#[derive(Default)]
struct Held {
    by_peer: parking_lot::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
}

/// One socket's place in [`Held`], given back when it closes.
pub(crate) struct Place {
    held: Arc<Held>,
    ip: std::net::IpAddr,
}

impl Held {
    fn take(self: &Arc<Self>, ip: std::net::IpAddr) -> Option<Place> {
        let mut by_peer = self.by_peer.lock();
        let total: usize = by_peer.values().sum();
        let mine = by_peer.entry(ip).or_default();
        if *mine >= MAX_PER_PEER || total >= MAX_CONNECTIONS {
            return None;
        }
        *mine += 1;
        Some(Place {
            held: self.clone(),
            ip,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut by_peer = self.held.by_peer.lock();
        if let Some(n) = by_peer.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                by_peer.remove(&self.ip);
            }
        }
    }
}

/// A bound relay listener with this stack's identity.
pub struct Bound {
    tcp: TcpListener,
    tls: TlsAcceptor,
    fingerprint: String,
}

impl Bound {
    /// Binds `addr` with the identity kept at `identity` (made on first
    /// use).
    pub async fn bind(addr: SocketAddr, identity: &std::path::Path) -> anyhow::Result<Bound> {
        let identity = Identity::load_or_create(identity, "clankie-main")?;
        let config = relay_tls::server_config(&identity)?;
        let tcp = TcpListener::bind(addr).await?;
        Ok(Bound {
            tcp,
            tls: TlsAcceptor::from(Arc::new(config)),
            fingerprint: identity.fingerprint(),
        })
    }

    /// The address and pin a machine needs.
    pub fn discovery(&self) -> std::io::Result<clankie_types::discovery::RelayDiscovery> {
        Ok(clankie_types::discovery::RelayDiscovery {
            addr: self.tcp.local_addr()?.to_string(),
            cert_sha256: self.fingerprint.clone(),
        })
    }

    /// Serves until `shutdown`.
    pub(crate) async fn serve(
        self,
        shared: Arc<Shared>,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<TlsConn>>(MAX_HANDSHAKES);
        let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
        let held = Arc::new(Held::default());
        let Bound { tcp, tls, .. } = self;
        let stop = shutdown.clone();
        let accept = async move {
            loop {
                let (sock, peer) = tokio::select! {
                    () = stop.cancelled() => return,
                    r = tcp.accept() => match r {
                        Ok(s) => s,
                        // A transient accept failure (no descriptors)
                        // must not end the listener.
                        Err(_) => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                let Some(place) = held.take(peer.ip()) else {
                    continue;
                };
                let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                    continue;
                };
                let (tls, tx) = (tls.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    let Ok(Ok(stream)) = tokio::time::timeout(HANDSHAKE, tls.accept(sock)).await
                    else {
                        return;
                    };
                    let Some(key) = relay_tls::peer_fingerprint(stream.get_ref().1) else {
                        return;
                    };
                    let _ = tx
                        .send(Ok(TlsConn {
                            inner: stream,
                            key: MachineKey(key),
                            _place: place,
                        }))
                        .await;
                });
            }
        };
        let face = RelayServer::new(RelayFace::new(shared, shutdown.clone()))
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        let server = tonic::transport::Server::builder()
            .max_concurrent_streams(Some(MAX_STREAMS))
            .http2_keepalive_interval(Some(Duration::from_secs(10)))
            .http2_keepalive_timeout(Some(Duration::from_secs(20)))
            .add_service(face)
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::ReceiverStream::new(rx),
                shutdown.clone().cancelled_owned(),
            );
        let accepting = tokio::spawn(accept);
        // The stop waits for streams a grace period, then ends them: a peer
        // that never finishes a request does not hold the gateway up.
        let served = tokio::select! {
            r = server => r.map_err(anyhow::Error::from),
            () = async {
                shutdown.cancelled().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => Ok(()),
        };
        accepting.abort();
        served
    }
}

/// A finished TLS connection and the key its peer proved.
pub(crate) struct TlsConn {
    inner: TlsStream<TcpStream>,
    key: MachineKey,
    /// Given back when the connection closes.
    _place: Place,
}

impl Connected for TlsConn {
    type ConnectInfo = MachineKey;

    fn connect_info(&self) -> MachineKey {
        self.key.clone()
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
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

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
