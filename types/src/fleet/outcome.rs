//! How a dispatched call ended, as far as anyone can know.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The upstream answered.
    Ok,
    /// The upstream answered with an error, or the call was refused before
    /// it left.
    Error,
    /// Sent, and no answer came back in time: the call may have applied.
    /// Reconcile with its receipt id; never repeat it.
    Uncertain,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Uncertain => "uncertain",
        }
    }

    /// As the internal wire carries it (`mcphost.v1.Outcome`).
    pub fn wire(self) -> i32 {
        use clankie_proto::mcphost::v1::Outcome as W;
        (match self {
            Outcome::Ok => W::Ok,
            Outcome::Error => W::Error,
            Outcome::Uncertain => W::Uncertain,
        }) as i32
    }

    /// From the internal wire; unspecified or unknown is no outcome.
    pub fn from_wire(value: i32) -> Option<Outcome> {
        use clankie_proto::mcphost::v1::Outcome as W;
        match W::try_from(value).ok()? {
            W::Ok => Some(Outcome::Ok),
            W::Error => Some(Outcome::Error),
            W::Uncertain => Some(Outcome::Uncertain),
            W::Unspecified => None,
        }
    }

    /// The word as the member-facing JSON spells it; anything else is not
    /// an outcome.
    pub fn parse(word: &str) -> Option<Outcome> {
        match word {
            "ok" => Some(Outcome::Ok),
            "error" => Some(Outcome::Error),
            "uncertain" => Some(Outcome::Uncertain),
            _ => None,
        }
    }
}

/// The answer to a dispatch whose request left but whose verdict never came
/// back (a reset, a timeout, a service dying): it may have applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lost {
    pub receipt_id: String,
    /// Always [`Outcome::Uncertain`].
    pub outcome: Outcome,
    pub detail: String,
}

/// What a member reads when the answer was lost after the forward.
pub const LOST_AFTER_FORWARD: &str = "the answer was lost after the request was forwarded; it may have applied: reconcile by this receiptId, never repeat it under a new id";

/// The [`Lost`] answer for `receipt_id`.
pub fn lost_after_forward(receipt_id: &str) -> Lost {
    Lost {
        receipt_id: receipt_id.to_string(),
        outcome: Outcome::Uncertain,
        detail: LOST_AFTER_FORWARD.to_string(),
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_are_the_golden_ones_both_ways() {
        let f = super::super::fixture("outcomes.json");
        let words: Vec<&str> = f
            .as_array()
            .expect("list")
            .iter()
            .map(|w| w.as_str().expect("word"))
            .collect();
        let ours = [Outcome::Ok, Outcome::Error, Outcome::Uncertain];
        assert_eq!(words, ours.map(Outcome::as_str));
        for o in ours {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
            assert_eq!(serde_json::to_value(o).expect("json"), o.as_str());
        }
        assert_eq!(Outcome::parse("OK"), None);
        for o in ours {
            assert_eq!(Outcome::from_wire(o.wire()), Some(o));
        }
        assert_eq!(Outcome::from_wire(0), None);
        assert_eq!(Outcome::from_wire(99), None);
    }
}
