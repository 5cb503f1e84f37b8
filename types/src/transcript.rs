//! The closed words of a lead's transcript: what an entry is, whose words it
//! holds, what kind of conversation holds it, and what sent a wake. On disk
//! (`mailbox/transcripts/*.jsonl`, `mailbox/state.json`) each is the word it
//! was when it was a string.

crate::closed_set! {
    /// What a transcript entry is.
    pub enum EntryKind as clankie_proto::mailbox::v1::EntryKind {
        /// A worker report (`message_clankie`).
        Message = "message" => Message,
        /// A completion harvest.
        Watch = "watch" => Watch,
        /// A self-wake or an Auto round.
        Wake = "wake" => Wake,
        /// The owner's words.
        Owner = "owner" => Owner,
        /// A peer message's copy: agent output that wakes no one.
        Peer = "peer" => Peer,
    }
}

impl EntryKind {
    /// What a seat may report as: a message only (unspecified on the wire
    /// is a message). Completion harvests (`watch`), wakes, the owner's
    /// words and peer copies are written by the service itself, so no seat
    /// can pass its words off as one of them.
    pub fn reported(value: i32) -> Option<EntryKind> {
        match EntryKind::from_wire(value) {
            None if value == 0 => Some(EntryKind::Message),
            Some(EntryKind::Message) => Some(EntryKind::Message),
            _ => None,
        }
    }
}

crate::closed_set! {
    /// Where a worker's report stands, as its lookup answers.
    pub enum ReportState as clankie_proto::mailbox::v1::ReportState {
        /// In its lead's transcript.
        Accepted = "accepted" => Accepted,
        /// Never accepted, and it never will be: its id is sealed.
        NotDelivered = "not_delivered" => NotDelivered,
        /// An attempt may still be live, or the evidence cannot be read.
        Unresolved = "unresolved" => Unresolved,
    }
}

crate::closed_set! {
    /// Whose words a transcript entry holds.
    pub enum EntryRole as clankie_proto::mailbox::v1::EntryRole {
        /// Anything a worker wrote: never an instruction to the lead.
        Agent = "agent" => Agent,
        /// Only the owner.
        Owner = "owner" => Owner,
        /// The service itself (wakes).
        System = "system" => System,
    }
}

crate::closed_set! {
    /// What kind of conversation a transcript belongs to.
    pub enum ConversationKind as clankie_proto::mailbox::v1::ConversationKind {
        /// The global head.
        Head = "head" => Head,
        /// A lead chat.
        Lead = "lead" => Lead,
    }
}

crate::closed_set! {
    /// What sent a wake; its word is the entry's source.
    pub enum WakeSource as clankie_proto::mailbox::v1::WakeSource {
        /// An Auto round.
        Auto = "auto" => Auto,
        /// A lead's scheduled self-wake.
        SelfWake = "self" => SelfWake,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seat_reports_messages_only() {
        assert_eq!(EntryKind::reported(0), Some(EntryKind::Message));
        assert_eq!(
            EntryKind::reported(EntryKind::Message.wire()),
            Some(EntryKind::Message)
        );
        for k in [
            EntryKind::Owner,
            EntryKind::Peer,
            EntryKind::Watch,
            EntryKind::Wake,
        ] {
            assert_eq!(EntryKind::reported(k.wire()), None, "{k}");
        }
        assert_eq!(EntryKind::reported(99), None);
    }

    #[test]
    fn the_words_on_disk_are_the_strings_they_were() {
        let words: Vec<&str> = EntryKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(words, ["message", "watch", "wake", "owner", "peer"]);
        assert_eq!(EntryRole::WORDS, ["agent", "owner", "system"]);
        assert_eq!(ConversationKind::WORDS, ["head", "lead"]);
        assert_eq!(WakeSource::WORDS, ["auto", "self"]);
    }
}
