//! Where a peer message stands. On disk (`mailbox/seats.json`) and on the
//! wire it is the snake_case name, exactly as it was when it was a string.

crate::closed_set! {
    /// A peer message's state.
    pub enum PeerMessageState as clankie_proto::mailbox::v1::PeerMessageState {
        /// Queued for the recipient; not yet acknowledged.
        Unresolved = "unresolved" => Unresolved,
        /// The recipient's harness acknowledged it.
        Delivered = "delivered" => Delivered,
        /// The recipient's pane closed before it was delivered.
        RecipientGone = "recipient_gone" => RecipientGone,
        /// A newer seat took the recipient's pane before it was delivered.
        Superseded = "superseded" => Superseded,
    }
}

impl PeerMessageState {
    /// What a sender reads: only a native delivery receipt confirms.
    pub fn outcome(self) -> PeerOutcome {
        if self == PeerMessageState::Delivered {
            PeerOutcome::Confirmed
        } else {
            PeerOutcome::Unconfirmed
        }
    }
}

crate::closed_set! {
    /// Whether a native delivery receipt confirmed a peer message.
    pub enum PeerOutcome as clankie_proto::mailbox::v1::PeerOutcome {
        Confirmed = "confirmed" => Confirmed,
        Unconfirmed = "unconfirmed" => Unconfirmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_and_outcome_crosses_the_wire_and_back() {
        for s in [
            PeerMessageState::Unresolved,
            PeerMessageState::Delivered,
            PeerMessageState::RecipientGone,
            PeerMessageState::Superseded,
        ] {
            assert_eq!(PeerMessageState::from_wire(s.wire()), Some(s));
            let o = s.outcome();
            assert_eq!(PeerOutcome::from_wire(o.wire()), Some(o));
        }
        assert_eq!(PeerMessageState::from_wire(0), None);
        assert_eq!(PeerOutcome::from_wire(0), None);
        assert_eq!(
            PeerMessageState::Delivered.outcome(),
            PeerOutcome::Confirmed
        );
        assert_eq!(
            PeerMessageState::Superseded.outcome(),
            PeerOutcome::Unconfirmed
        );
    }

    #[test]
    fn the_names_on_disk_are_the_strings_they_were() {
        for s in [
            PeerMessageState::Unresolved,
            PeerMessageState::Delivered,
            PeerMessageState::RecipientGone,
            PeerMessageState::Superseded,
        ] {
            let json = serde_json::to_string(&s).expect("json");
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(
                serde_json::from_str::<PeerMessageState>(&json).ok(),
                Some(s)
            );
        }
        assert!(serde_json::from_str::<PeerMessageState>("\"lost\"").is_err());
    }
}
