//! The gateway's connection loop: every listener bounds what a connection
//! may hold before it proves anything.
//!
//! - A connection must send its request head within the header timeout
//!   (slow or silent clients are closed).
//! - A listener holds at most `max_conns` connections, at most
//!   `max_unadmitted` of them not yet admitted, and at most `max_per_ip` from
//!   one address. A connection past a cap is closed at accept, before any
//!   byte is read, so a flood costs one descriptor for a moment.
//! - A connection stops counting as unadmitted once a request on it is
//!   admitted (a bearer, or a local proof).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// How long open connections may finish after shutdown begins.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Connection bounds of one listener.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// The time a connection has to send a complete request head.
    pub header_timeout: Duration,
    pub max_conns: usize,
    pub max_unadmitted: usize,
    pub max_per_ip: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            max_conns: 1024,
            max_unadmitted: 128,
            max_per_ip: 256,
        }
    }
}

/// Marks a connection admitted: its unadmitted slot is given back. Every
/// request on a connection carries it.
#[derive(Clone)]
pub struct ConnTag(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl ConnTag {
    pub fn admitted(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Open connections per client address.
type PerIp = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// One listener's counts.
struct Caps {
    limits: ConnLimits,
    conns: Arc<Semaphore>,
    unadmitted: Arc<Semaphore>,
    per_ip: PerIp,
    refusing: Arc<Semaphore>,
}

/// Holds one connection's place; freed when the connection ends.
struct Place {
    _conn: OwnedSemaphorePermit,
    ip: Option<(IpAddr, PerIp)>,
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some((ip, map)) = &self.ip {
            let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = map.get_mut(ip) {
                *n -= 1;
                if *n == 0 {
                    map.remove(ip);
                }
            }
        }
    }
}

impl Caps {
    fn new(limits: ConnLimits) -> Self {
        Caps {
            limits,
            conns: Arc::new(Semaphore::new(limits.max_conns)),
            unadmitted: Arc::new(Semaphore::new(limits.max_unadmitted)),
            per_ip: Arc::new(Mutex::new(HashMap::new())),
            refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
        }
    }

    /// A place for a new connection, or None past a cap.
    fn place(&self, ip: Option<IpAddr>) -> Option<(Place, ConnTag)> {
        let conn = self.conns.clone().try_acquire_owned().ok()?;
        let unadmitted = self.unadmitted.clone().try_acquire_owned().ok()?;
        let ip = match ip {
            Some(ip) => {
                let mut map = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
                let n = map.entry(ip).or_insert(0);
                if *n >= self.limits.max_per_ip {
                    return None;
                }
                *n += 1;
                Some((ip, self.per_ip.clone()))
            }
            None => None,
        };
        Some((
            Place { _conn: conn, ip },
            ConnTag(Arc::new(Mutex::new(Some(unadmitted)))),
        ))
    }
}

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
    let body = serde_json::json!({ "error": e.body() }).to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
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

/// Serves `router` on `listener` until `shutdown`. `peer` names what the
/// kernel says about each connection (inserted as `ConnectInfo` on every
/// request), `ip` the address the per-IP cap counts.
pub async fn serve<L, P>(
    mut listener: L,
    router: Router,
    limits: ConnLimits,
    peer: impl Fn(&L::Io, &L::Addr) -> Option<P> + Send + 'static,
    ip: impl Fn(&L::Addr) -> Option<IpAddr> + Send + 'static,
    shutdown: CancellationToken,
) -> anyhow::Result<()>
where
    L: axum::serve::Listener,
    P: Clone + Send + Sync + 'static,
{
    let caps = Caps::new(limits);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut refused: u64 = 0;
    loop {
        let (io, addr) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let Some((place, tag)) = caps.place(ip(&addr)) else {
            // Answered without reading the request. Logged once per power of
            // two, so a flood cannot flood the log too.
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(refused, "gateway.connection.refused");
            }
            if let Ok(permit) = caps.refusing.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    let _permit = permit;
                    turn_away(io).await;
                });
            }
            continue;
        };
        let info = peer(&io, &addr);
        let service =
            router
                .clone()
                .map_request(move |mut req: http::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(tag.clone());
                    if let Some(info) = &info {
                        req.extensions_mut().insert(ConnectInfo(info.clone()));
                    }
                    req.map(axum::body::Body::new)
                });
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(Duration::from_secs(30)));
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(io), TowerToHyperService::new(service))
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _place = place;
            let _ = conn.await;
        });
    }
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("gateway connections still open after the shutdown grace");
    }
    Ok(())
}
