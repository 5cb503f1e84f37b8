//! What one listener's connections may hold, and which of them go first
//! when a newcomer needs room.
//!
//! Every connection is in the book from its accept to its close, with the
//! peer it counts against (a TCP address, or on the Unix socket the process
//! the kernel named) and its state:
//!
//! - **waiting**: it has sent no request yet;
//! - **busy**: a request is being answered on it;
//! - **idle**: it sent requests, none is being answered now (a keep-alive);
//! - **proven**, besides: a request on it was admitted as a member (a pane
//!   proven from kernel facts, a fleet bearer, a grant).
//!
//! A newcomer past the listener's cap, or past its peer's, takes the place
//! of the oldest connection that is neither proven nor busy (a waiting one
//! only once it has waited a quarter of the header timeout, so a burst of
//! real clients is told to retry rather than cut off). Only when there is
//! none is it turned away. So a flood of connections from a process that
//! proves nothing, idle or having sent one request each, only ever displaces
//! itself, and a member is never refused because another process holds
//! connections. A member's own proven connections are bounded apart
//! (`max_per_member`), so one member cannot hold every place either.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Connection bounds of one listener.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// The time a connection has to send a complete request head.
    pub header_timeout: Duration,
    pub max_conns: usize,
    pub max_waiting: usize,
    /// Most connections one peer holds: one address on TCP, one process on
    /// the Unix socket.
    pub max_per_peer: usize,
    /// Most proven connections one member (pane, bearer link, grant) holds.
    pub max_per_member: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            max_conns: 4096,
            max_waiting: 128,
            max_per_peer: 256,
            max_per_member: 64,
        }
    }
}

/// Who a connection counts against before it proves anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerKey {
    Ip(IpAddr),
    /// A process, by its pidfs id (or its pid where there is no pidfs).
    Process(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    Busy(u32),
    Idle,
}

struct Entry {
    peer: Option<PeerKey>,
    /// Since when it has been in its state (waiting or idle).
    since: Instant,
    state: State,
    member: Option<String>,
    evict: CancellationToken,
}

#[derive(Default)]
struct Book {
    next: u64,
    entries: HashMap<u64, Entry>,
    per_peer: HashMap<PeerKey, usize>,
    per_member: HashMap<String, usize>,
}

impl Book {
    /// The oldest connection a newcomer may displace, of `peer` alone when
    /// given and not among `skip`: never proven, never busy, and a waiting
    /// one only once it has waited `grace` (only waiting ones when
    /// `waiting_only`).
    fn oldest(
        &self,
        peer: Option<PeerKey>,
        grace: Duration,
        waiting_only: bool,
        skip: &[u64],
    ) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(id, e)| e.member.is_none() && !skip.contains(id))
            .filter(|(_, e)| peer.is_none() || e.peer == peer)
            .filter(|(_, e)| match e.state {
                State::Waiting => e.since.elapsed() >= grace,
                State::Idle => !waiting_only,
                State::Busy(_) => false,
            })
            .min_by_key(|(_, e)| e.since)
            .map(|(id, _)| *id)
    }

    fn evict(&mut self, id: u64) {
        if let Some(e) = self.remove(id) {
            e.evict.cancel();
        }
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        if let Some(peer) = e.peer {
            decrement(&mut self.per_peer, &peer);
        }
        if let Some(m) = &e.member {
            decrement(&mut self.per_member, m);
        }
        Some(e)
    }
}

fn decrement<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, k: &K) {
    if let Some(n) = map.get_mut(k) {
        *n -= 1;
        if *n == 0 {
            map.remove(k);
        }
    }
}

/// One listener's book.
#[derive(Clone)]
pub(crate) struct Caps {
    limits: ConnLimits,
    book: Arc<Mutex<Book>>,
}

/// One connection's place: it leaves the book when dropped.
pub(crate) struct Place {
    pub(crate) conn: Conn,
    pub(crate) evicted: CancellationToken,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.conn.caps.book.lock().remove(self.conn.id);
    }
}

/// A connection's handle, carried on each of its requests: the request
/// marks it busy while answered, admission marks it proven.
#[derive(Clone)]
pub(crate) struct Conn {
    id: u64,
    caps: Caps,
}

impl Caps {
    pub(crate) fn new(limits: ConnLimits) -> Self {
        Caps {
            limits,
            book: Arc::default(),
        }
    }

    /// A place for a new connection of `peer`, displacing an unproven idle
    /// or long-waiting one where a cap is reached; None when none can go.
    pub(crate) fn place(&self, peer: Option<PeerKey>) -> Option<Place> {
        let grace = self.limits.header_timeout / 4;
        let mut book = self.book.lock();
        // Work out every displacement before making any, so a newcomer
        // turned away displaces nothing.
        let mut out = Vec::new();
        if let Some(p) = peer
            && book.per_peer.get(&p).copied().unwrap_or(0) >= self.limits.max_per_peer.max(1)
        {
            out.push(book.oldest(Some(p), grace, false, &out)?);
        }
        if book.entries.len() - out.len() >= self.limits.max_conns.max(1) {
            out.push(book.oldest(None, grace, false, &out)?);
        }
        let waiting = book
            .entries
            .iter()
            .filter(|(id, e)| e.state == State::Waiting && !out.contains(id))
            .count();
        if waiting >= self.limits.max_waiting.max(1) {
            out.push(book.oldest(None, grace, true, &out)?);
        }
        for id in out {
            book.evict(id);
        }
        book.next += 1;
        let id = book.next;
        let evict = CancellationToken::new();
        book.entries.insert(
            id,
            Entry {
                peer,
                since: Instant::now(),
                state: State::Waiting,
                member: None,
                evict: evict.clone(),
            },
        );
        if let Some(p) = peer {
            *book.per_peer.entry(p).or_insert(0) += 1;
        }
        Some(Place {
            conn: Conn {
                id,
                caps: self.clone(),
            },
            evicted: evict,
        })
    }
}

impl Conn {
    /// A request on it is being answered: it is not displaceable now.
    pub(crate) fn begin(&self) {
        if let Some(e) = self.caps.book.lock().entries.get_mut(&self.id) {
            e.state = match e.state {
                State::Busy(n) => State::Busy(n + 1),
                State::Waiting | State::Idle => State::Busy(1),
            };
        }
    }

    /// A request's answer was sent (or dropped).
    pub(crate) fn end(&self) {
        if let Some(e) = self.caps.book.lock().entries.get_mut(&self.id) {
            e.state = match e.state {
                State::Busy(n) if n > 1 => State::Busy(n - 1),
                _ => {
                    e.since = Instant::now();
                    State::Idle
                }
            };
        }
    }

    /// A request on it was admitted as `member`: from now on it is never
    /// displaced. False (and it stays unproven) when that member already
    /// holds its most proven connections.
    pub(crate) fn prove(&self, member: &str) -> bool {
        let limit = self.caps.limits.max_per_member.max(1);
        let mut book = self.caps.book.lock();
        let held = book.per_member.get(member).copied().unwrap_or(0);
        let Some(e) = book.entries.get_mut(&self.id) else {
            return true;
        };
        match &e.member {
            Some(m) if m == member => return true,
            Some(_) => return true,
            None if held >= limit => return false,
            None => e.member = Some(member.to_string()),
        }
        *book.per_member.entry(member.to_string()).or_insert(0) += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_conns: usize, max_waiting: usize, max_per_peer: usize) -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::ZERO,
            max_conns,
            max_waiting,
            max_per_peer,
            max_per_member: 2,
        }
    }

    fn ip(n: u8) -> Option<PeerKey> {
        Some(PeerKey::Ip(IpAddr::from([192, 0, 2, n])))
    }

    #[test]
    fn an_idle_unproven_connection_makes_room_and_a_proven_or_busy_one_never_does() {
        let caps = Caps::new(limits(3, 10, 10));
        let flood = caps.place(ip(1)).expect("flood");
        flood.conn.begin();
        flood.conn.end();
        let member = caps.place(ip(1)).expect("member");
        assert!(member.conn.prove("pane:a"));
        let busy = caps.place(ip(1)).expect("busy");
        busy.conn.begin();
        // Full: the idle, unproven one goes; the member and the busy one stay.
        let newcomer = caps.place(ip(2)).expect("room made");
        assert!(flood.evicted.is_cancelled());
        assert!(!member.evicted.is_cancelled() && !busy.evicted.is_cancelled());
        // Nothing displaceable left: the next one is turned away.
        newcomer.conn.prove("pane:b");
        assert!(caps.place(ip(2)).is_none());
    }

    #[test]
    fn a_peer_past_its_cap_displaces_its_own_connections_only() {
        let caps = Caps::new(limits(100, 100, 2));
        let other = caps.place(ip(9)).expect("other");
        other.conn.begin();
        other.conn.end();
        let a = caps.place(ip(1)).expect("a");
        a.conn.begin();
        a.conn.end();
        let _b = caps.place(ip(1)).expect("b");
        let _c = caps.place(ip(1)).expect("c");
        assert!(a.evicted.is_cancelled(), "its own oldest idle one went");
        assert!(!other.evicted.is_cancelled(), "another peer's stayed");
    }

    #[test]
    fn a_member_holds_at_most_its_share_of_proven_connections() {
        let caps = Caps::new(limits(100, 100, 100));
        let places: Vec<Place> = (0..3).map(|_| caps.place(ip(1)).expect("place")).collect();
        assert!(places[0].conn.prove("pane:a"));
        assert!(places[1].conn.prove("pane:a"));
        assert!(!places[2].conn.prove("pane:a"), "past its share");
        assert!(
            places[2].conn.prove("pane:b"),
            "another member's is its own"
        );
        drop(places);
        let again = caps.place(ip(1)).expect("place");
        assert!(
            again.conn.prove("pane:a"),
            "closed connections free the share"
        );
    }

    #[test]
    fn a_young_waiting_connection_is_not_displaced_and_nothing_is_counted_for_a_refusal() {
        let mut l = limits(100, 1, 100);
        l.header_timeout = Duration::from_secs(60);
        let caps = Caps::new(l);
        let first = caps.place(ip(1)).expect("first");
        for _ in 0..10 {
            assert!(caps.place(ip(1)).is_none());
        }
        assert!(!first.evicted.is_cancelled());
        assert_eq!(caps.book.lock().per_peer.get(&ip(1).expect("ip")), Some(&1));
        drop(first);
        assert!(caps.book.lock().per_peer.is_empty());
        let _again = caps.place(ip(1)).expect("room again");
    }
}
