//! The gateway's connection loop: every listener bounds what a connection
//! may hold before it proves anything.
//!
//! - A connection must send its request head within the header timeout
//!   (slow or silent clients are closed).
//! - A listener holds at most `max_conns` connections and at most
//!   `max_per_ip` from one address; a connection past either is answered
//!   503 (Retry-After) without its request being read.
//! - At most `max_waiting` connections may be open without having sent a
//!   request: these are unauthenticated, and cost a descriptor each. A new
//!   one past that evicts the oldest waiting one if it has waited a quarter
//!   of the header timeout, and is answered 503 otherwise. A real client
//!   sends its request at once, so a flood of idle connections only ever
//!   displaces itself and members keep getting in, while a burst of real
//!   requests is told to retry rather than cut off.
//! - Once its first request head arrives a connection stops waiting and is
//!   never evicted; its request is then admitted or refused at once.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
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
    pub max_waiting: usize,
    pub max_per_ip: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            max_conns: 1024,
            max_waiting: 128,
            max_per_ip: 256,
        }
    }
}

/// Connections waiting for their first admitted request, oldest first.
#[derive(Default)]
struct Waiting {
    next: u64,
    queue: VecDeque<(u64, std::time::Instant, CancellationToken)>,
}

type WaitingRef = Arc<Mutex<Waiting>>;

/// A connection's place in the waiting queue; it leaves on its first
/// request head, or when it closes.
#[derive(Clone)]
struct ConnTag {
    id: u64,
    waiting: WaitingRef,
}

impl ConnTag {
    fn leave(&self) {
        let mut w = self.waiting.lock();
        w.queue.retain(|(id, _, _)| *id != self.id);
    }
}

/// Open connections per client address.
type PerIp = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// One listener's counts.
struct Caps {
    limits: ConnLimits,
    conns: Arc<Semaphore>,
    waiting: WaitingRef,
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
            let mut map = map.lock();
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
            waiting: Arc::default(),
            per_ip: Arc::new(Mutex::new(HashMap::new())),
            refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
        }
    }

    /// A place for a new connection (its tag, and the token that evicts
    /// it while it waits), or None past a cap.
    fn place(&self, ip: Option<IpAddr>) -> Option<(Place, ConnTag, CancellationToken)> {
        let conn = self.conns.clone().try_acquire_owned().ok()?;
        // Every check comes before anything is counted, so a connection
        // turned away leaves no count behind. One accept loop serves a
        // listener, so nothing changes between the checks and the counts.
        if let Some(ip) = ip
            && self.per_ip.lock().get(&ip).copied().unwrap_or(0) >= self.limits.max_per_ip
        {
            return None;
        }
        let evict = CancellationToken::new();
        let id = {
            let mut w = self.waiting.lock();
            if w.queue.len() >= self.limits.max_waiting.max(1) {
                let old_enough = w
                    .queue
                    .front()
                    .is_some_and(|(_, since, _)| since.elapsed() >= self.limits.header_timeout / 4);
                if !old_enough {
                    return None;
                }
                if let Some((_, _, oldest)) = w.queue.pop_front() {
                    oldest.cancel();
                }
            }
            w.next += 1;
            let id = w.next;
            w.queue
                .push_back((id, std::time::Instant::now(), evict.clone()));
            id
        };
        let ip = ip.map(|ip| {
            *self.per_ip.lock().entry(ip).or_insert(0) += 1;
            (ip, self.per_ip.clone())
        });
        let tag = ConnTag {
            id,
            waiting: self.waiting.clone(),
        };
        Some((Place { _conn: conn, ip }, tag, evict))
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
        let Some((place, tag, evict)) = caps.place(ip(&addr)) else {
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
        let leave = tag.clone();
        let service =
            router
                .clone()
                .map_request(move |mut req: http::Request<hyper::body::Incoming>| {
                    tag.leave();
                    if let Some(info) = &info {
                        req.extensions_mut().insert(ConnectInfo(info.clone()));
                    }
                    req.map(axum::body::Body::new)
                });
        // HTTP/1.1 only: MCP's streamable HTTP needs nothing more, and the
        // header timeout then bounds every connection's head (h2c has none).
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _place = place;
            tokio::select! {
                _ = conn => {}
                // Evicted while still waiting for admission: dropped.
                _ = evict.cancelled() => {}
            }
            leave.leave();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_conns: usize, max_waiting: usize, max_per_ip: usize) -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::from_secs(1),
            max_conns,
            max_waiting,
            max_per_ip,
        }
    }

    #[test]
    fn the_oldest_waiting_connection_is_evicted_and_active_ones_never_are() {
        let mut l = limits(100, 2, 100);
        l.header_timeout = Duration::ZERO;
        let caps = Caps::new(l);
        let (_p1, t1, e1) = caps.place(None).expect("one");
        let (_p2, _t2, e2) = caps.place(None).expect("two");
        t1.leave();
        let (_p3, _t3, e3) = caps.place(None).expect("three");
        assert!(
            !e1.is_cancelled(),
            "a connection that sent a request is never evicted"
        );
        assert!(!e2.is_cancelled());
        let (_p4, _t4, _e4) = caps.place(None).expect("four");
        assert!(e2.is_cancelled(), "the oldest waiting one goes");
        assert!(!e3.is_cancelled());
        // A waiting connection younger than a quarter of the header timeout
        // is not evicted: the newcomer is turned away instead.
        let young = Caps::new(limits(100, 1, 100));
        let (_p, _t, first) = young.place(None).expect("first");
        assert!(young.place(None).is_none());
        assert!(!first.is_cancelled());
    }

    #[test]
    fn connection_and_per_address_caps_refuse_and_free_on_close() {
        let ip: IpAddr = "192.0.2.7".parse().expect("ip");
        let other: IpAddr = "192.0.2.8".parse().expect("ip");
        let caps = Caps::new(limits(3, 10, 2));
        let a = caps.place(Some(ip)).expect("a");
        let _b = caps.place(Some(ip)).expect("b");
        assert!(caps.place(Some(ip)).is_none(), "per address");
        let _c = caps.place(Some(other)).expect("another address");
        drop(a);
        let d = caps.place(Some(ip)).expect("room again after a close");
        assert!(caps.place(Some(other)).is_none(), "total");
        drop(d);
    }

    #[test]
    fn a_connection_turned_away_leaves_no_count_behind() {
        let ip: IpAddr = "192.0.2.9".parse().expect("ip");
        // One waiting place, never old enough to evict: every newcomer from
        // this address is turned away, many more times than its cap.
        let caps = Caps::new(limits(100, 1, 2));
        let (first, tag, _e) = caps.place(Some(ip)).expect("first");
        for _ in 0..10 {
            assert!(caps.place(Some(ip)).is_none());
        }
        // The first connection ends: it leaves the queue and frees its place.
        tag.leave();
        drop(first);
        let _a = caps
            .place(Some(ip))
            .expect("the address has its places back");
        assert_eq!(caps.per_ip.lock().get(&ip).copied(), Some(1));
    }
}
