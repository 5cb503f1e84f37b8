//! What a seat's mailbox hands its harness: each delivery's kind, and how a
//! harness treats it.

crate::closed_set! {
    /// Who a delivery is from.
    pub enum DeliveryKind as clankie_proto::mailbox::v1::DeliveryKind {
        /// The hiring lead (or the conversation that adopted the hire).
        Lead = "lead" => Lead,
        /// Another seat, through `message_peer`.
        Peer = "peer" => Peer,
        /// The landing review (a candidate for a reviewer, a verdict for its
        /// author).
        Review = "review" => Review,
        /// A wake the auto-scheduler or the lead's own schedule sent.
        Wake = "wake" => Wake,
        /// To a lead's seat: a worker's report (`message_clankie`),
        /// untrusted agent output.
        Message = "message" => Message,
        /// To a lead's seat: a hire's agent finished (a completion harvest).
        Watch = "watch" => Watch,
    }
}

impl DeliveryKind {
    /// Whether a busy harness takes it into the running turn (the lead's
    /// word steers) rather than after it.
    pub fn steers(self) -> bool {
        self == DeliveryKind::Lead
    }

    /// Who a harness is told it is from: a landing review speaks for the
    /// lead; a worker's report is the worker's word, not the owner's.
    pub fn source(self) -> &'static str {
        match self {
            DeliveryKind::Lead | DeliveryKind::Review => "lead",
            DeliveryKind::Peer => "peer",
            DeliveryKind::Wake => "wake",
            DeliveryKind::Message => "worker",
            DeliveryKind::Watch => "watch",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_kinds_are_ours_only_the_lead_steers_and_each_names_its_source() {
        let f = super::super::fixture("delivery_kinds.json");
        let golden = f.as_object().expect("object");
        assert_eq!(golden.len(), DeliveryKind::ALL.len());
        for k in DeliveryKind::ALL {
            assert_eq!(DeliveryKind::parse(k.as_str()), Some(k));
            assert_eq!(DeliveryKind::from_wire(k.wire()), Some(k));
            assert_eq!(serde_json::to_value(k).expect("json"), k.as_str());
            assert_eq!(golden[k.as_str()]["steers"], k.steers(), "{k:?}");
            assert_eq!(golden[k.as_str()]["source"], k.source(), "{k:?}");
        }
    }
}
