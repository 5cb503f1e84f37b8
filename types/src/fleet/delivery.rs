//! What a seat's mailbox hands its harness: each delivery's kind, and how a
//! harness treats it.

use serde::{Deserialize, Serialize};

/// Who a delivery is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryKind {
    /// The hiring lead (or the conversation that adopted the hire).
    Lead,
    /// Another seat, through `message_peer`.
    Peer,
    /// The landing review (a candidate for a reviewer, a verdict for its
    /// author).
    Review,
    /// A wake the auto-scheduler or the lead's own schedule sent.
    Wake,
}

impl DeliveryKind {
    pub const ALL: [DeliveryKind; 4] = [
        DeliveryKind::Lead,
        DeliveryKind::Peer,
        DeliveryKind::Review,
        DeliveryKind::Wake,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryKind::Lead => "lead",
            DeliveryKind::Peer => "peer",
            DeliveryKind::Review => "review",
            DeliveryKind::Wake => "wake",
        }
    }

    pub fn parse(word: &str) -> Option<DeliveryKind> {
        DeliveryKind::ALL.into_iter().find(|k| k.as_str() == word)
    }

    /// The kind as `mailbox.v1.DeliveryKind`.
    pub fn wire(self) -> i32 {
        use clankie_proto::mailbox::v1::DeliveryKind as W;
        (match self {
            DeliveryKind::Lead => W::Lead,
            DeliveryKind::Peer => W::Peer,
            DeliveryKind::Review => W::Review,
            DeliveryKind::Wake => W::Wake,
        }) as i32
    }

    /// The kind a wire value names; unspecified or unknown is none.
    pub fn from_wire(value: i32) -> Option<DeliveryKind> {
        use clankie_proto::mailbox::v1::DeliveryKind as W;
        match W::try_from(value).ok()? {
            W::Lead => Some(DeliveryKind::Lead),
            W::Peer => Some(DeliveryKind::Peer),
            W::Review => Some(DeliveryKind::Review),
            W::Wake => Some(DeliveryKind::Wake),
            W::Unspecified => None,
        }
    }

    /// Whether a busy harness takes it into the running turn (the lead's
    /// word steers) rather than after it.
    pub fn steers(self) -> bool {
        self == DeliveryKind::Lead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_kinds_are_ours_and_only_the_lead_steers() {
        let f = super::super::fixture("delivery_kinds.json");
        let golden = f.as_object().expect("object");
        assert_eq!(golden.len(), DeliveryKind::ALL.len());
        for k in DeliveryKind::ALL {
            assert_eq!(DeliveryKind::parse(k.as_str()), Some(k));
            assert_eq!(DeliveryKind::from_wire(k.wire()), Some(k));
            assert_eq!(serde_json::to_value(k).expect("json"), k.as_str());
            assert_eq!(golden[k.as_str()]["steers"], k.steers(), "{k:?}");
        }
    }
}
