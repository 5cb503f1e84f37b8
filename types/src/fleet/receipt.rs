//! Receipt ids. A member may choose its own (so an answer lost on the way
//! back can still be reconciled under the id it sent); otherwise the bridge
//! or the gateway mints one before anything is forwarded. Every kind obeys
//! one rule, and each kind's prefix is decided here alone.

use serde::{Deserialize, Serialize};

/// The longest receipt id.
pub const MAX_LEN: usize = 128;

/// The refusal text for an id outside [`ReceiptId::parse`]'s rule.
pub const RULE: &str = "receiptId must be 1-128 characters of letters, digits, - _ . :";

/// What a receipt is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptKind {
    /// A connected tool call (`clankie_call`), a grant's call included.
    Call,
    /// A worker report (`message_clankie`).
    Report,
    /// A peer message (`message_peer`).
    Peer,
    /// An owner's work-item write (`clankie work write`).
    Work,
}

impl ReceiptKind {
    /// The prefix a minted id of this kind starts with.
    pub fn prefix(self) -> &'static str {
        match self {
            ReceiptKind::Call => "rcpt_",
            ReceiptKind::Report => "rpt_",
            ReceiptKind::Peer => "peer_",
            ReceiptKind::Work => "work_",
        }
    }
}

/// A receipt id that obeys the rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ReceiptId(String);

/// An id outside the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{RULE}")]
pub struct ReceiptIdRejected;

impl ReceiptId {
    /// A new id of `kind`: its prefix and 32 random hex digits.
    pub fn mint(kind: ReceiptKind) -> ReceiptId {
        ReceiptId(format!(
            "{}{}",
            kind.prefix(),
            uuid::Uuid::new_v4().simple()
        ))
    }

    /// One to [`MAX_LEN`] bytes of `A-Z a-z 0-9 - _ . :`.
    pub fn parse(id: &str) -> Result<ReceiptId, ReceiptIdRejected> {
        let ok = (1..=MAX_LEN).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
        if ok {
            Ok(ReceiptId(id.to_string()))
        } else {
            Err(ReceiptIdRejected)
        }
    }

    /// The member's own id when it gave one, else a new one of `kind`.
    pub fn given_or_mint(
        given: Option<&str>,
        kind: ReceiptKind,
    ) -> Result<ReceiptId, ReceiptIdRejected> {
        given.map_or_else(|| Ok(ReceiptId::mint(kind)), ReceiptId::parse)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl TryFrom<String> for ReceiptId {
    type Error = ReceiptIdRejected;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ReceiptId::parse(&s)
    }
}

impl From<ReceiptId> for String {
    fn from(r: ReceiptId) -> String {
        r.0
    }
}

impl std::fmt::Display for ReceiptId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_ids_parse_as_the_fixture_says() {
        let f = super::super::fixture("receipt_ids.json");
        for id in f["valid"].as_array().expect("valid") {
            let id = id.as_str().expect("text");
            assert_eq!(ReceiptId::parse(id).map(|r| r.into_string()), Ok(id.into()));
        }
        for id in f["invalid"].as_array().expect("invalid") {
            assert!(
                ReceiptId::parse(id.as_str().expect("text")).is_err(),
                "{id}"
            );
        }
        assert_eq!(f["maxLen"], MAX_LEN);
        for (kind, prefix) in [
            (ReceiptKind::Call, "call"),
            (ReceiptKind::Report, "report"),
            (ReceiptKind::Peer, "peer"),
        ] {
            assert_eq!(f["prefixes"][prefix], kind.prefix());
        }
    }

    #[test]
    fn a_minted_id_has_its_kinds_prefix_and_obeys_the_rule() {
        for kind in [ReceiptKind::Call, ReceiptKind::Report, ReceiptKind::Peer] {
            let id = ReceiptId::mint(kind);
            assert!(id.as_str().starts_with(kind.prefix()));
            assert!(ReceiptId::parse(id.as_str()).is_ok());
            assert_ne!(id, ReceiptId::mint(kind));
        }
    }

    #[test]
    fn a_given_id_is_kept_and_a_bad_one_refused() {
        let kept = ReceiptId::given_or_mint(Some("k1"), ReceiptKind::Peer).expect("kept");
        assert_eq!(kept.as_str(), "k1");
        assert!(ReceiptId::given_or_mint(Some("a b"), ReceiptKind::Peer).is_err());
        let minted = ReceiptId::given_or_mint(None, ReceiptKind::Report).expect("minted");
        assert!(minted.as_str().starts_with("rpt_"));
        let json: Result<ReceiptId, _> = serde_json::from_str("\"\"");
        assert!(json.is_err(), "an empty id does not deserialize");
    }
}
