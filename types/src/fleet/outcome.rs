//! How a dispatched call ended, as far as anyone can know.

crate::closed_set! {
    /// How a dispatched call ended (`mcphost.v1.Outcome` on the internal
    /// wire, the word in the member-facing JSON).
    pub enum Outcome as clankie_proto::mcphost::v1::Outcome {
        /// The upstream answered.
        Ok = "ok" => Ok,
        /// The upstream answered with an error, or the call was refused
        /// before it left.
        Error = "error" => Error,
        /// Sent, and no answer came back in time: the call may have applied.
        /// Reconcile with its receipt id; never repeat it.
        Uncertain = "uncertain" => Uncertain,
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
