//! The gateway's connection loop: every listener bounds what a connection
//! may hold before it proves anything.
//!
//! - A connection must send its request head within the header timeout
//!   (slow or silent clients are closed).
//! - Each connection holds a place in its listener's book (`caps.rs`): past
//!   a cap, a newcomer displaces the oldest connection that has proven
//!   nothing and is not being answered, or is answered 503 (Retry-After)
//!   without its request being read.
//! - Each request marks its connection busy until its answer is sent, and
//!   carries the connection's handle, so admission can mark it proven.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::caps::{Caps, Conn};
pub use crate::caps::{ConnLimits, PeerKey};

/// How long open connections may finish after shutdown begins.
const SHUTDOWN_GRACE: Duration =
    Duration::from_secs(crate::drain::DRAIN.as_secs() + crate::drain::CLOSE_AFTER.as_secs() + 1);

/// An answer's body that marks its connection no longer busy when it is
/// dropped (sent, or abandoned). Its size is the inner body's, so a sized
/// answer keeps its Content-Length.
struct Answered {
    inner: axum::body::Body,
    conn: Conn,
}

impl Drop for Answered {
    fn drop(&mut self) {
        self.conn.end();
    }
}

impl http_body::Body for Answered {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The connection a request arrived on, for admission to mark proven.
#[derive(Clone)]
pub(crate) struct ConnHandle(pub(crate) Conn);

/// How many turned-away connections may be answered at once; past this a
/// connection is simply closed.
const MAX_REFUSING: usize = 256;

/// The answer to a connection past a cap: 503 with Retry-After, written
/// before its request is read. The request is then drained briefly, so the
/// close does not reset the answer away.
async fn turn_away<I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut io: I) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let e = clankie_runtime::ErrorCode::ServiceUnavailable
        .err("the gateway holds its most connections; nothing was forwarded, retry shortly");
    let mut body = e.body();
    body["retryAfterMs"] = serde_json::json!(crate::refusal::RETRY_AFTER_MS);
    let body = serde_json::json!({ "error": body }).to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        crate::refusal::RETRY_AFTER_MS.div_ceil(1000),
        body.len()
    );
    let answer = async {
        io.write_all(head.as_bytes()).await?;
        io.write_all(body.as_bytes()).await?;
        io.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut left = 64usize << 10;
        while left > 0 {
            let n = io.read(&mut sink).await?;
            if n == 0 {
                break;
            }
            left = left.saturating_sub(n);
        }
        std::io::Result::Ok(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}

/// A TCP listener whose connections send each write at once: an answer's
/// last bytes and every server-sent event would otherwise wait for the
/// peer's delayed ACK (Nagle's algorithm, up to 40 ms on Linux).
pub(crate) fn no_delay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt as _;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "gateway.connection.nodelay_unset");
        }
    })
}

/// Serves `router` on `listener` until `shutdown`. `peer` names what the
/// kernel says about each connection (inserted as `ConnectInfo` on every
/// request), `key` who the connection counts against.
pub async fn serve<L, P>(
    mut listener: L,
    router: Router,
    limits: ConnLimits,
    peer: impl Fn(&L::Io, &L::Addr) -> Option<P> + Send + 'static,
    key: impl Fn(&L::Addr, Option<&P>) -> Option<PeerKey> + Send + 'static,
    shutdown: CancellationToken,
) -> anyhow::Result<()>
where
    L: axum::serve::Listener,
    P: Clone + Send + Sync + 'static,
{
    let caps = Caps::new(limits);
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut refused: u64 = 0;
    loop {
        let (io, addr) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let info = peer(&io, &addr);
        let Some(place) = caps.place(key(&addr, info.as_ref())) else {
            // Answered without reading the request. Logged once per power of
            // two, so a flood cannot flood the log too.
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(refused, "gateway.connection.refused");
            }
            if let Ok(permit) = refusing.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    let _permit = permit;
                    turn_away(io).await;
                });
            }
            continue;
        };
        let router = router.clone();
        let conn = place.conn.clone();
        let service = tower::service_fn(move |req: http::Request<hyper::body::Incoming>| {
            let (router, conn, info) = (router.clone(), conn.clone(), info.clone());
            async move {
                conn.begin();
                let mut req = req.map(axum::body::Body::new);
                if let Some(info) = info {
                    req.extensions_mut().insert(ConnectInfo(info));
                }
                req.extensions_mut().insert(ConnHandle(conn.clone()));
                let resp = router.oneshot(req).await?;
                // The connection is busy until the answer's body is done.
                Ok::<_, std::convert::Infallible>(
                    resp.map(|inner| axum::body::Body::new(Answered { inner, conn })),
                )
            }
        });
        // HTTP/1.1 only: MCP's streamable HTTP needs nothing more, and the
        // header timeout then bounds every connection's head (h2c has none).
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            tokio::select! {
                _ = conn => {}
                // Displaced by a newcomer: dropped.
                _ = place.evicted.cancelled() => {}
            }
            drop(place);
        });
    }
    // Closed now, not when the open connections are done: a connection
    // made during the drain would wait in the backlog for an accept that
    // never comes; refused, its client knows at once. (A socket passed by a
    // service manager stays open there, for the next start.)
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("gateway connections still open after the shutdown grace");
    }
    Ok(())
}
