//! What the mailbox has seen of each seat's bridge: the process that polls
//! for it, the tools it reported, and when. In memory only: these are
//! diagnostics and a delivery route's liveness, and they grant nothing.
//!
//! A bridge process is an observation cohort. A poll from a newer process
//! (a later kernel start) starts a new cohort; a poll from an older one,
//! arriving late, keeps the route alive but never overwrites the newer
//! cohort's observation.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::codex_seats::Proc;

/// One seat's current cohort.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The polling process (none where admission named no owner).
    pub owner: Option<Proc>,
    /// The tools it reported in its last poll (empty: it names none).
    pub tools: Vec<String>,
    /// When the cohort last polled, wall clock.
    pub polled_at_ms: i64,
    /// Bridge processes seen for this seat since the service started.
    pub cohorts: u32,
    /// When any of its bridges last polled: the delivery route.
    route_at: Instant,
}

/// Every seat's bridge observations.
#[derive(Debug, Default)]
pub struct Bridges {
    seats: HashMap<String, Seen>,
}

/// Whether `new` is an older process than `current`, by what the kernel
/// says of both (unknown starts are never older).
fn older(new: Option<Proc>, current: Option<Proc>) -> bool {
    match (new, current) {
        (Some(n), Some(c)) => n.start_time != 0 && c.start_time != 0 && n.start_time < c.start_time,
        _ => false,
    }
}

impl Bridges {
    /// Notes a poll by `owner` reporting `tools`. Returns whether the poll
    /// became the seat's observation (false: a late poll of an older
    /// bridge, which only keeps the route alive).
    pub fn note(
        &mut self,
        seat_id: &str,
        owner: Option<Proc>,
        tools: &[String],
        now: Instant,
        now_ms: i64,
    ) -> bool {
        let Some(seen) = self.seats.get_mut(seat_id) else {
            self.seats.insert(
                seat_id.to_string(),
                Seen {
                    owner,
                    tools: tools.to_vec(),
                    polled_at_ms: now_ms,
                    cohorts: 1,
                    route_at: now,
                },
            );
            return true;
        };
        seen.route_at = now;
        if seen.owner != owner {
            if older(owner, seen.owner) {
                return false;
            }
            seen.owner = owner;
            seen.cohorts += 1;
        }
        seen.tools = tools.to_vec();
        seen.polled_at_ms = now_ms;
        true
    }

    /// Whether some bridge of the seat polled within `window`.
    pub fn reachable(&self, seat_id: &str, window: Duration, now: Instant) -> bool {
        self.seats
            .get(seat_id)
            .is_some_and(|s| now.saturating_duration_since(s.route_at) < window)
    }

    /// The seat's current cohort, if any bridge polled.
    pub fn seen(&self, seat_id: &str) -> Option<&Seen> {
        self.seats.get(seat_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, start_time: u64) -> Option<Proc> {
        Some(Proc {
            pid,
            pidfs_id: pid as u64,
            start_time,
        })
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_newer_bridge_starts_a_cohort_and_an_older_ones_late_poll_cannot_overwrite_it() {
        let mut b = Bridges::default();
        let t0 = Instant::now();
        assert!(b.note("s", proc(10, 100), &names(&["a"]), t0, 1));
        assert!(b.note("s", proc(20, 200), &names(&["a", "b"]), t0, 2));
        assert_eq!(b.seen("s").map(|s| s.cohorts), Some(2));
        // The first bridge's poll arrives late: the route lives, the
        // observation stays the newer process's.
        let later = t0 + Duration::from_secs(50);
        assert!(!b.note("s", proc(10, 100), &names(&[]), later, 3));
        let seen = b.seen("s").expect("seen");
        assert_eq!(seen.owner, proc(20, 200));
        assert_eq!(seen.tools, names(&["a", "b"]));
        assert_eq!(seen.polled_at_ms, 2);
        assert!(b.reachable(
            "s",
            Duration::from_secs(60),
            later + Duration::from_secs(20)
        ));
        // The same process polling again refreshes its own observation.
        assert!(b.note("s", proc(20, 200), &names(&["c"]), later, 4));
        assert_eq!(
            b.seen("s").map(|s| (s.cohorts, s.tools.clone())),
            Some((2, names(&["c"])))
        );
    }

    #[test]
    fn unknown_starts_are_never_older_and_an_idle_route_expires() {
        let mut b = Bridges::default();
        let t0 = Instant::now();
        b.note("s", proc(10, 100), &[], t0, 1);
        assert!(
            b.note("s", proc(11, 0), &[], t0, 2),
            "an unknown start is a new cohort"
        );
        assert!(!b.reachable("s", Duration::from_secs(60), t0 + Duration::from_secs(61)));
        assert!(!b.reachable("other", Duration::from_secs(60), t0));
    }
}
