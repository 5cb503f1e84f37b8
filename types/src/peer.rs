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

impl std::fmt::Display for PeerMessageState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
