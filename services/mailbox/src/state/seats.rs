//! Seats, their deliveries and peer message receipts.
//!
//! A seat is one occupant of one pane: its id is derived from the pane and
//! the foreground agent's kernel identity, so a new occupant is a new seat
//! and an old seat id never reaches it. Deliveries wait per pane until the
//! seat's bridge hands them to its harness and acknowledges (the native
//! delivery receipt). Peer message receipts follow the seed's contract:
//! - while a message to a seat is unresolved, another send to that seat
//!   reads the original and sends nothing;
//! - after 15 minutes unproven it settles `superseded` (unconfirmed), and
//!   the next different message goes out labelled as following it;
//! - a recipient that closes or changes occupant settles `recipient_gone`;
//! - nothing is ever resent; bodies of the latest 100 settled and of every
//!   unresolved message are kept, older ones keep a compact receipt so an
//!   old id can never dispatch again.
//!
//! Inbound claims: a seat's poll only lists unclaimed deliveries; the bridge
//! then claims them, hands each to its harness and acknowledges it under its
//! claim. A claim stays exclusive through timeouts and lost responses: no
//! other poll sees that delivery again. Only the claimant's release, sent
//! when it definitely did not hand the delivery off, makes it claimable
//! again. A claimed delivery that is never acknowledged stays uncertain (a
//! peer message then settles `superseded` after 15 minutes), never resent.
//!
//! Saved in `mailbox/seats.json` by atomic rename after fsync.

use clankie_types::PeerMessageState;
use clankie_types::fleet::DeliveryKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// An unproven peer message settles as superseded after this long.
pub const SUPERSEDE_AFTER_MS: i64 = 15 * 60 * 1000;
/// Full bodies kept for this many settled peer messages.
pub const RETAINED_BODIES: usize = 100;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SeatRec {
    pub seat_id: String,
    pub fleet: String,
    pub link_id: String,
    pub pane_id: String,
    pub agent_pid: i32,
    pub agent_pidfs_id: u64,
    pub agent_start_time: u64,
    pub agent_executable: String,
    /// Set when the pane closed or another occupant took it.
    #[serde(default)]
    pub gone: bool,
    /// When the book first recorded it (0 in books written before this
    /// was kept): a pane sweep that began earlier cannot close it.
    #[serde(default)]
    pub recorded_at_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRec {
    pub delivery_id: String,
    pub link_id: String,
    pub pane_id: String,
    /// Peer deliveries go only to this exact seat; lead messages to whoever
    /// holds the pane's seat.
    #[serde(default)]
    pub seat_id: String,
    pub kind: DeliveryKind,
    pub from: String,
    pub text: String,
    pub created_at_ms: i64,
    #[serde(default)]
    pub peer_message_id: String,
    #[serde(default)]
    pub follows: String,
    #[serde(default)]
    pub delivered_at_ms: i64,
    /// Set when a bridge claimed it: exclusive through timeouts and lost
    /// responses; cleared only by that claimant's release before handoff.
    #[serde(default)]
    pub claim_id: String,
    #[serde(default)]
    pub claimed_at_ms: i64,
}

impl DeliveryRec {
    /// A new, unclaimed delivery to a pane (and, when `seat_id` is set, only
    /// to that exact seat).
    pub fn new(
        delivery_id: String,
        (link_id, pane_id, seat_id): (&str, &str, &str),
        kind: DeliveryKind,
        from: String,
        text: String,
        now: i64,
    ) -> Self {
        DeliveryRec {
            delivery_id,
            link_id: link_id.into(),
            pane_id: pane_id.into(),
            seat_id: seat_id.into(),
            kind,
            from,
            text,
            created_at_ms: now,
            peer_message_id: String::new(),
            follows: String::new(),
            delivered_at_ms: 0,
            claim_id: String::new(),
            claimed_at_ms: 0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PeerMessageRec {
    pub id: String,
    pub receipt_id: String,
    pub sender_seat: String,
    pub recipient_seat: String,
    pub fleet: String,
    /// `None` once pruned.
    pub text: Option<String>,
    pub created_at_ms: i64,
    pub state: PeerMessageState,
    #[serde(default)]
    pub settled_at_ms: i64,
    #[serde(default)]
    pub follows: String,
    pub delivery_id: String,
}

impl PeerMessageRec {
    pub fn unresolved(&self) -> bool {
        self.state == PeerMessageState::Unresolved
    }

    pub fn outcome(&self) -> clankie_types::PeerOutcome {
        self.state.outcome()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeatBook {
    pub version: u32,
    pub seats: Vec<SeatRec>,
    pub deliveries: Vec<DeliveryRec>,
    pub peer_messages: Vec<PeerMessageRec>,
}

/// The seat id of one occupant of one pane.
pub fn seat_id(link_id: &str, pane_id: &str, pidfs_id: u64, start_time: u64, pid: i32) -> String {
    let mut h = Sha256::new();
    h.update(format!(
        "{link_id}\n{pane_id}\n{pidfs_id}\n{start_time}\n{pid}"
    ));
    let digest = h.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("seat-{hex}")
}

/// What a send decided.
#[derive(Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// An existing receipt answers: nothing was sent.
    Original(usize),
    /// A new message, at this index.
    Sent(usize),
}

impl SeatBook {
    /// Records a seat seen now; an earlier occupant of the same pane is gone.
    /// Returns true when anything changed.
    /// Whether [`SeatBook::upsert_seat`] would change anything: a seat not
    /// recorded yet, or another live seat of its pane to retire. Lets the
    /// hot path skip the copy-and-save of an unchanged book.
    pub fn would_change(&self, seat: &SeatRec) -> bool {
        !self.seats.iter().any(|s| s.seat_id == seat.seat_id)
            || self.seats.iter().any(|s| {
                s.link_id == seat.link_id
                    && s.pane_id == seat.pane_id
                    && s.seat_id != seat.seat_id
                    && !s.gone
            })
    }

    pub fn upsert_seat(&mut self, seat: SeatRec, now: i64) -> bool {
        let mut changed = false;
        let mut gone_seats = Vec::new();
        for s in self
            .seats
            .iter_mut()
            .filter(|s| s.link_id == seat.link_id && s.pane_id == seat.pane_id)
        {
            if s.seat_id != seat.seat_id && !s.gone {
                s.gone = true;
                gone_seats.push(s.seat_id.clone());
                changed = true;
            }
        }
        for id in gone_seats {
            self.recipient_gone(&id, now);
        }
        if !self.seats.iter().any(|s| s.seat_id == seat.seat_id) {
            self.seats.push(SeatRec {
                recorded_at_ms: now,
                ..seat
            });
            changed = true;
        }
        changed
    }

    pub fn seat(&self, seat_id: &str) -> Option<&SeatRec> {
        self.seats.iter().find(|s| s.seat_id == seat_id)
    }

    /// Marks every seat of a pane gone (the pane closed).
    pub fn pane_gone(&mut self, link_id: &str, pane_id: &str, now: i64) {
        let ids: Vec<String> = self
            .seats
            .iter_mut()
            .filter(|s| s.link_id == link_id && s.pane_id == pane_id && !s.gone)
            .map(|s| {
                s.gone = true;
                s.seat_id.clone()
            })
            .collect();
        for id in ids {
            self.recipient_gone(&id, now);
        }
    }

    /// Settles every unresolved message to `seat_id` as recipient_gone and
    /// withdraws its undelivered peer deliveries.
    fn recipient_gone(&mut self, seat_id: &str, now: i64) {
        let mut withdrawn = Vec::new();
        for m in self
            .peer_messages
            .iter_mut()
            .filter(|m| m.recipient_seat == seat_id && m.unresolved())
        {
            m.state = PeerMessageState::RecipientGone;
            m.settled_at_ms = now;
            withdrawn.push(m.delivery_id.clone());
        }
        self.deliveries
            .retain(|d| !(withdrawn.contains(&d.delivery_id) && d.delivered_at_ms == 0));
        self.prune();
    }

    /// Settles messages unproven for 15 minutes as superseded.
    /// Whether [`SeatBook::supersede_stale`] would withdraw anything now.
    pub fn has_stale(&self, now: i64) -> bool {
        self.peer_messages
            .iter()
            .any(|m| m.unresolved() && now - m.created_at_ms >= SUPERSEDE_AFTER_MS)
    }

    pub fn supersede_stale(&mut self, now: i64) -> bool {
        let mut withdrawn = Vec::new();
        for m in self
            .peer_messages
            .iter_mut()
            .filter(|m| m.unresolved() && now - m.created_at_ms >= SUPERSEDE_AFTER_MS)
        {
            m.state = PeerMessageState::Superseded;
            m.settled_at_ms = now;
            withdrawn.push(m.delivery_id.clone());
        }
        if withdrawn.is_empty() {
            return false;
        }
        self.deliveries
            .retain(|d| !(withdrawn.contains(&d.delivery_id) && d.delivered_at_ms == 0));
        self.prune();
        true
    }

    /// Decides a send from `sender` to `recipient`. The caller has checked
    /// the recipient exists, is reachable and shares the sender's fleet.
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &mut self,
        sender: &SeatRec,
        recipient: &SeatRec,
        receipt_id: &str,
        text: &str,
        message_id: String,
        delivery_id: String,
        now: i64,
    ) -> SendOutcome {
        // A receipt id already used answers with its original.
        if let Some(i) = self
            .peer_messages
            .iter()
            .position(|m| m.receipt_id == receipt_id && m.sender_seat == sender.seat_id)
        {
            return SendOutcome::Original(i);
        }
        self.supersede_stale(now);
        // While one is unresolved to that seat, read it instead of sending.
        if let Some(i) = self.peer_messages.iter().position(|m| {
            m.unresolved()
                && m.sender_seat == sender.seat_id
                && m.recipient_seat == recipient.seat_id
        }) {
            return SendOutcome::Original(i);
        }
        // A new message follows the latest unconfirmed one to that seat.
        let follows = self
            .peer_messages
            .iter()
            .rev()
            .find(|m| {
                m.sender_seat == sender.seat_id
                    && m.recipient_seat == recipient.seat_id
                    && m.state == PeerMessageState::Superseded
            })
            .map(|m| m.id.clone())
            .unwrap_or_default();
        self.deliveries.push(DeliveryRec {
            peer_message_id: message_id.clone(),
            follows: follows.clone(),
            ..DeliveryRec::new(
                delivery_id.clone(),
                (&recipient.link_id, &recipient.pane_id, &recipient.seat_id),
                DeliveryKind::Peer,
                format!("seat:{}", sender.seat_id),
                text.to_string(),
                now,
            )
        });
        self.peer_messages.push(PeerMessageRec {
            id: message_id,
            receipt_id: receipt_id.to_string(),
            sender_seat: sender.seat_id.clone(),
            recipient_seat: recipient.seat_id.clone(),
            fleet: sender.fleet.clone(),
            text: Some(text.to_string()),
            created_at_ms: now,
            state: PeerMessageState::Unresolved,
            settled_at_ms: 0,
            follows,
            delivery_id,
        });
        SendOutcome::Sent(self.peer_messages.len() - 1)
    }

    fn for_seat(d: &DeliveryRec, seat: &SeatRec) -> bool {
        d.link_id == seat.link_id
            && d.pane_id == seat.pane_id
            && (d.seat_id.is_empty() || d.seat_id == seat.seat_id)
    }

    /// Unclaimed, undelivered deliveries for the seat now holding a pane.
    pub fn pending(&self, seat: &SeatRec) -> Vec<DeliveryRec> {
        self.deliveries
            .iter()
            .filter(|d| d.delivered_at_ms == 0 && d.claim_id.is_empty() && Self::for_seat(d, seat))
            .cloned()
            .collect()
    }

    /// Claims the named deliveries that are still unclaimed for this seat;
    /// returns the ones this claim now holds.
    pub fn claim(
        &mut self,
        seat: &SeatRec,
        ids: &[String],
        claim_id: &str,
        now: i64,
    ) -> Vec<DeliveryRec> {
        let mut held = Vec::new();
        for d in self.deliveries.iter_mut().filter(|d| {
            ids.contains(&d.delivery_id)
                && d.delivered_at_ms == 0
                && d.claim_id.is_empty()
                && Self::for_seat(d, seat)
        }) {
            d.claim_id = claim_id.to_string();
            d.claimed_at_ms = now;
            held.push(d.clone());
        }
        held
    }

    /// The claimant definitely did not hand the delivery off: it becomes
    /// claimable again. Any other claim id changes nothing.
    pub fn release(&mut self, seat: &SeatRec, delivery_id: &str, claim_id: &str) -> bool {
        match self.deliveries.iter_mut().find(|d| {
            d.delivery_id == delivery_id && d.delivered_at_ms == 0 && Self::for_seat(d, seat)
        }) {
            Some(d) if !claim_id.is_empty() && d.claim_id == claim_id => {
                d.claim_id.clear();
                d.claimed_at_ms = 0;
                true
            }
            _ => false,
        }
    }

    /// Records a native delivery receipt under the claim that holds it.
    /// Only the seat it was for, with that claim, may ack.
    pub fn ack(
        &mut self,
        seat: &SeatRec,
        delivery_id: &str,
        claim_id: &str,
        now: i64,
    ) -> Option<bool> {
        let d = self
            .deliveries
            .iter_mut()
            .find(|d| d.delivery_id == delivery_id && Self::for_seat(d, seat))?;
        if d.delivered_at_ms != 0 {
            return Some(false);
        }
        if d.claim_id.is_empty() || d.claim_id != claim_id {
            return None;
        }
        d.delivered_at_ms = now;
        let peer = d.peer_message_id.clone();
        if let Some(m) = self
            .peer_messages
            .iter_mut()
            .find(|m| m.id == peer && m.unresolved())
        {
            m.state = PeerMessageState::Delivered;
            m.settled_at_ms = now;
        }
        // Delivered bodies need not wait in the queue.
        self.deliveries
            .retain(|d| d.delivered_at_ms == 0 || now - d.delivered_at_ms < 60_000);
        self.prune();
        Some(true)
    }

    /// Keeps bodies of the latest settled messages and every unresolved one.
    fn prune(&mut self) {
        let mut settled: Vec<usize> = self
            .peer_messages
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.unresolved() && m.text.is_some())
            .map(|(i, _)| i)
            .collect();
        if settled.len() <= RETAINED_BODIES {
            return;
        }
        settled.sort_by_key(|&i| self.peer_messages[i].settled_at_ms);
        let excess = settled.len() - RETAINED_BODIES;
        for &i in &settled[..excess] {
            self.peer_messages[i].text = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(pane: &str, pidfs: u64) -> SeatRec {
        SeatRec {
            seat_id: seat_id("l", pane, pidfs, 1, 7),
            fleet: "f".into(),
            link_id: "l".into(),
            pane_id: pane.into(),
            agent_pid: 7,
            agent_pidfs_id: pidfs,
            agent_start_time: 1,
            agent_executable: "x".into(),
            gone: false,
            recorded_at_ms: 0,
        }
    }

    fn send(
        b: &mut SeatBook,
        a: &SeatRec,
        r: &SeatRec,
        receipt: &str,
        text: &str,
        now: i64,
    ) -> SendOutcome {
        let n = b.peer_messages.len();
        b.send(a, r, receipt, text, format!("pm{n}"), format!("d{n}"), now)
    }

    #[test]
    fn an_unresolved_message_is_read_not_resent_and_stale_ones_are_superseded() {
        let (a, r) = (seat("%1", 1), seat("%2", 2));
        let mut b = SeatBook::default();
        b.upsert_seat(a.clone(), 0);
        b.upsert_seat(r.clone(), 0);
        assert_eq!(send(&mut b, &a, &r, "r1", "hello", 0), SendOutcome::Sent(0));
        // Same receipt: the original. Another text while unresolved: the original.
        assert_eq!(
            send(&mut b, &a, &r, "r1", "hello", 1),
            SendOutcome::Original(0)
        );
        assert_eq!(
            send(&mut b, &a, &r, "r2", "again", 2),
            SendOutcome::Original(0)
        );
        assert_eq!(b.deliveries.len(), 1);
        // Fifteen minutes unproven: superseded, and the next message follows it.
        let later = SUPERSEDE_AFTER_MS + 5;
        assert_eq!(
            send(&mut b, &a, &r, "r3", "third", later),
            SendOutcome::Sent(1)
        );
        assert_eq!(b.peer_messages[0].state, PeerMessageState::Superseded);
        assert_eq!(
            b.peer_messages[0].outcome(),
            clankie_types::PeerOutcome::Unconfirmed
        );
        assert_eq!(b.peer_messages[1].follows, "pm0");
        // The superseded original is withdrawn, never delivered later.
        assert_eq!(b.pending(&r).len(), 1);
        assert_eq!(b.pending(&r)[0].peer_message_id, "pm1");
        // A definite refusal before handoff releases it for the next poll.
        assert_eq!(b.claim(&r, &["d1".into()], "c0", later).len(), 1);
        assert!(b.release(&r, "d1", "c0"));
        assert_eq!(b.pending(&r).len(), 1);
        // Delivery: claimed, then acknowledged under that claim; only the
        // recipient may claim or ack.
        assert!(b.claim(&a, &["d1".into()], "c-a", later).is_empty());
        assert_eq!(b.claim(&r, &["d1".into()], "c1", later).len(), 1);
        // A claim is exclusive: a second poll neither sees nor claims it.
        assert!(b.pending(&r).is_empty());
        assert!(b.claim(&r, &["d1".into()], "c2", later).is_empty());
        assert!(!b.release(&r, "d1", "c2"), "only the claimant releases");
        assert_eq!(b.ack(&a, "d1", "c1", later + 1), None);
        assert_eq!(b.ack(&r, "d1", "c2", later + 1), None);
        assert_eq!(b.ack(&r, "d1", "c1", later + 1), Some(true));
        assert_eq!(b.peer_messages[1].state, PeerMessageState::Delivered);
        assert_eq!(b.ack(&r, "d1", "c1", later + 2), Some(false));
    }

    #[test]
    fn a_new_occupant_is_a_new_seat_and_old_messages_are_gone() {
        let (a, r) = (seat("%1", 1), seat("%2", 2));
        let mut b = SeatBook::default();
        b.upsert_seat(a.clone(), 0);
        b.upsert_seat(r.clone(), 0);
        send(&mut b, &a, &r, "r1", "hello", 0);
        let newcomer = seat("%2", 3);
        assert_ne!(newcomer.seat_id, r.seat_id);
        b.upsert_seat(newcomer.clone(), 5);
        assert_eq!(b.peer_messages[0].state, PeerMessageState::RecipientGone);
        assert!(
            b.pending(&newcomer).is_empty(),
            "never delivered to a later occupant"
        );
    }

    #[test]
    fn only_the_latest_hundred_settled_bodies_are_kept() {
        let a = seat("%1", 1);
        let mut b = SeatBook::default();
        for i in 0..130u64 {
            let r = seat(&format!("%{}", i + 10), i + 10);
            send(&mut b, &a, &r, &format!("r{i}"), "body", i as i64);
            let d = b
                .peer_messages
                .last()
                .map(|m| m.delivery_id.clone())
                .unwrap_or_default();
            b.claim(&r, std::slice::from_ref(&d), "c", i as i64);
            b.ack(&r, &d, "c", i as i64 + 1);
        }
        let kept = b.peer_messages.iter().filter(|m| m.text.is_some()).count();
        assert_eq!(kept, RETAINED_BODIES);
        assert!(b.peer_messages[0].text.is_none());
        assert!(b.peer_messages[129].text.is_some());
        // A pruned receipt still answers its receipt id: nothing is resent.
        let r0 = seat("%10", 10);
        assert_eq!(
            send(&mut b, &a, &r0, "r0", "body", 500),
            SendOutcome::Original(0)
        );
    }

    #[test]
    fn a_seat_book_written_with_string_states_loads_and_saves_the_same_bytes() {
        // `seats.json` as it was written when peer-message states were
        // strings, byte for byte.
        let before = r#"{
  "version": 1,
  "seats": [],
  "deliveries": [],
  "peerMessages": [
    {
      "id": "pm_1",
      "receiptId": "r1",
      "senderSeat": "a",
      "recipientSeat": "b",
      "fleet": "f",
      "text": "hi",
      "createdAtMs": 1,
      "state": "delivered",
      "settledAtMs": 2,
      "follows": "",
      "deliveryId": "d1"
    },
    {
      "id": "pm_2",
      "receiptId": "r2",
      "senderSeat": "a",
      "recipientSeat": "b",
      "fleet": "f",
      "text": null,
      "createdAtMs": 3,
      "state": "recipient_gone",
      "settledAtMs": 4,
      "follows": "pm_1",
      "deliveryId": "d2"
    }
  ]
}"#;
        let book: SeatBook = serde_json::from_str(before).expect("loads");
        assert_eq!(book.peer_messages[0].state, PeerMessageState::Delivered);
        assert_eq!(book.peer_messages[1].state, PeerMessageState::RecipientGone);
        let after = serde_json::to_vec_pretty(&book).expect("saves");
        assert_eq!(String::from_utf8_lossy(&after), before);
    }
}
