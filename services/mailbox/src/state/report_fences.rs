//! Inbound report fences (`mailbox/report-fences.json`): what makes a
//! worker's report (`message_clankie`) land at most once, whatever crash or
//! lost answer happens around it.
//!
//! - A send first records a **pending fence** for its pane: its receipt
//!   id, the mailbox instance attempting it and its deadline (the host's
//!   20 s request deadline). The report is then accepted (its transcript
//!   line carries the receipt id) and the fence cleared.
//! - A pane holds at most one pending fence. One whose attempt can no
//!   longer be live (its instance was replaced: the exclusive process lock
//!   is another's now; or its deadline passed) is settled by the next
//!   request from that pane: accepted, the fence is cleared; not accepted,
//!   its id is **sealed** and the fence cleared, in one write.
//! - A sealed id never accepts: not a delayed original, not a repeat.
//! - A lookup never sends. An id the mailbox never saw is sealed before
//!   the answer "not delivered", so a delayed original can never land
//!   after its sender was told it did not.
//! - The file is never saved over while unreadable: corrupt evidence stays
//!   uncertain.

use serde::{Deserialize, Serialize};

/// How long a report attempt may be live: the host's request deadline.
pub const REPORT_DEADLINE_MS: i64 = 20_000;
/// Seals kept (oldest go first); each outlives its id's last possible
/// delivery by far.
pub const RETAINED_SEALS: usize = 4096;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PendingFence {
    pub link_id: String,
    pub pane_id: String,
    pub receipt_id: String,
    /// The mailbox instance attempting it.
    pub owner: String,
    pub started_at_ms: i64,
    pub deadline_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Seal {
    pub link_id: String,
    pub pane_id: String,
    pub receipt_id: String,
    pub sealed_at_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReportFences {
    #[serde(default)]
    pub pending: Vec<PendingFence>,
    #[serde(default)]
    pub sealed: Vec<Seal>,
}

/// A pane: its link and pane id.
pub type Pane<'a> = (&'a str, &'a str);

impl PendingFence {
    fn is_in(&self, (link, pane): Pane) -> bool {
        self.link_id == link && self.pane_id == pane
    }

    /// Whether its attempt can no longer be live, seen by instance `me`
    /// at `now`: another instance made it (and `me` holds the exclusive
    /// process lock), or its deadline passed.
    pub fn settled_by(&self, me: &str, now: i64) -> bool {
        self.owner != me || now >= self.deadline_ms
    }
}

impl ReportFences {
    /// The pane's pending fence, if any.
    pub fn pending_in(&self, pane: Pane) -> Option<&PendingFence> {
        self.pending.iter().find(|f| f.is_in(pane))
    }

    /// Whether `receipt_id` is sealed for the pane.
    pub fn is_sealed(&self, (link, pane): Pane, receipt_id: &str) -> bool {
        self.sealed
            .iter()
            .any(|s| s.receipt_id == receipt_id && s.link_id == link && s.pane_id == pane)
    }

    /// Records an attempt; the pane has no pending fence (settle first).
    pub fn begin(&mut self, fence: PendingFence) {
        self.pending
            .retain(|f| !(f.link_id == fence.link_id && f.pane_id == fence.pane_id));
        self.pending.push(fence);
    }

    /// Clears the pane's fence for `receipt_id` (its report was accepted).
    pub fn clear(&mut self, pane: Pane, receipt_id: &str) -> bool {
        let before = self.pending.len();
        self.pending
            .retain(|f| !(f.is_in(pane) && f.receipt_id == receipt_id));
        self.pending.len() != before
    }

    /// Seals `receipt_id` for the pane and clears its matching fence, as
    /// one change.
    pub fn seal(&mut self, pane: Pane, receipt_id: &str, now: i64) {
        self.clear(pane, receipt_id);
        if !self.is_sealed(pane, receipt_id) {
            self.sealed.push(Seal {
                link_id: pane.0.into(),
                pane_id: pane.1.into(),
                receipt_id: receipt_id.into(),
                sealed_at_ms: now,
            });
        }
        let over = self.sealed.len().saturating_sub(RETAINED_SEALS);
        self.sealed.drain(..over);
    }

    /// Settles the pane's pending fence: cleared when its report was
    /// accepted, else its id sealed. Returns the settled fence.
    pub fn settle(&mut self, pane: Pane, accepted: bool, now: i64) -> Option<PendingFence> {
        let f = self.pending_in(pane)?.clone();
        if accepted {
            self.clear(pane, &f.receipt_id);
        } else {
            self.seal(pane, &f.receipt_id, now);
        }
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Pane = ("tmux", "%1");
    const Q: Pane = ("tmux", "%2");

    fn fence(pane: Pane, id: &str, owner: &str, deadline: i64) -> PendingFence {
        PendingFence {
            link_id: pane.0.into(),
            pane_id: pane.1.into(),
            receipt_id: id.into(),
            owner: owner.into(),
            started_at_ms: deadline - REPORT_DEADLINE_MS,
            deadline_ms: deadline,
        }
    }

    #[test]
    fn an_attempt_is_live_only_in_its_own_instance_before_its_deadline() {
        let f = fence(P, "rpt_a", "me", 1_000);
        assert!(!f.settled_by("me", 999), "live");
        assert!(f.settled_by("me", 1_000), "expired");
        assert!(f.settled_by("next", 10), "its instance was replaced");
    }

    #[test]
    fn settling_clears_an_accepted_fence_and_seals_an_unaccepted_one() {
        let mut b = ReportFences::default();
        b.begin(fence(P, "rpt_a", "old", 1_000));
        b.begin(fence(Q, "rpt_b", "old", 1_000));
        assert_eq!(
            b.settle(P, true, 5).map(|f| f.receipt_id),
            Some("rpt_a".into())
        );
        assert!(b.pending_in(P).is_none() && !b.is_sealed(P, "rpt_a"));
        b.settle(Q, false, 5);
        assert!(b.pending_in(Q).is_none() && b.is_sealed(Q, "rpt_b"));
        assert!(!b.is_sealed(P, "rpt_b"), "a seal is its pane's");
        assert!(b.settle(P, false, 6).is_none(), "nothing pending");
    }

    #[test]
    fn only_the_newest_seals_are_kept() {
        let mut b = ReportFences::default();
        for i in 0..RETAINED_SEALS + 3 {
            b.seal(P, &format!("rpt_{i}"), i as i64);
        }
        assert_eq!(b.sealed.len(), RETAINED_SEALS);
        assert!(!b.is_sealed(P, "rpt_0") && b.is_sealed(P, &format!("rpt_{}", RETAINED_SEALS + 2)));
    }
}
