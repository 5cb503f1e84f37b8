//! Where a peer message stands. On disk (`mailbox/seats.json`) and on the
//! wire it is the snake_case name, exactly as it was when it was a string.

use serde::{Deserialize, Serialize};

/// A peer message's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerMessageState {
    /// Queued for the recipient; not yet acknowledged.
    Unresolved,
    /// The recipient's harness acknowledged it.
    Delivered,
    /// The recipient's pane closed before it was delivered.
    RecipientGone,
    /// A newer seat took the recipient's pane before it was delivered.
    Superseded,
}

impl PeerMessageState {
    pub fn as_str(self) -> &'static str {
        match self {
            PeerMessageState::Unresolved => "unresolved",
            PeerMessageState::Delivered => "delivered",
            PeerMessageState::RecipientGone => "recipient_gone",
            PeerMessageState::Superseded => "superseded",
        }
    }
}

impl PeerMessageState {
    /// The state as `mailbox.v1.PeerMessageState`.
    pub fn wire(self) -> i32 {
        use clankie_proto::mailbox::v1::PeerMessageState as W;
        (match self {
            PeerMessageState::Unresolved => W::Unresolved,
            PeerMessageState::Delivered => W::Delivered,
            PeerMessageState::RecipientGone => W::RecipientGone,
            PeerMessageState::Superseded => W::Superseded,
        }) as i32
    }

    /// The state a wire value names; unspecified or unknown is none.
    pub fn from_wire(value: i32) -> Option<PeerMessageState> {
        use clankie_proto::mailbox::v1::PeerMessageState as W;
        match W::try_from(value).ok()? {
            W::Unresolved => Some(PeerMessageState::Unresolved),
            W::Delivered => Some(PeerMessageState::Delivered),
            W::RecipientGone => Some(PeerMessageState::RecipientGone),
            W::Superseded => Some(PeerMessageState::Superseded),
            W::Unspecified => None,
        }
    }

    /// What a sender reads: only a native delivery receipt confirms.
    pub fn outcome(self) -> PeerOutcome {
        if self == PeerMessageState::Delivered {
            PeerOutcome::Confirmed
        } else {
            PeerOutcome::Unconfirmed
        }
    }
}

/// Whether a native delivery receipt confirmed a peer message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerOutcome {
    Confirmed,
    Unconfirmed,
}

impl PeerOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PeerOutcome::Confirmed => "confirmed",
            PeerOutcome::Unconfirmed => "unconfirmed",
        }
    }

    /// The outcome as `mailbox.v1.PeerOutcome`.
    pub fn wire(self) -> i32 {
        use clankie_proto::mailbox::v1::PeerOutcome as W;
        (match self {
            PeerOutcome::Confirmed => W::Confirmed,
            PeerOutcome::Unconfirmed => W::Unconfirmed,
        }) as i32
    }

    /// The outcome a wire value names; unspecified or unknown is none.
    pub fn from_wire(value: i32) -> Option<PeerOutcome> {
        use clankie_proto::mailbox::v1::PeerOutcome as W;
        match W::try_from(value).ok()? {
            W::Confirmed => Some(PeerOutcome::Confirmed),
            W::Unconfirmed => Some(PeerOutcome::Unconfirmed),
            W::Unspecified => None,
        }
    }
}

impl std::fmt::Display for PeerMessageState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
