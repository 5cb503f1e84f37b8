//! The closed words of a hire's record: how it ended, and whether its seat
//! is ready for deliveries. On disk (`mailbox/state.json`) an open hire's
//! end is `""`, as it always was.

crate::closed_set! {
    /// How a hire ended (none while open).
    pub enum HireEnd as clankie_proto::mailbox::v1::HireEnd {
        /// Its lead (or whoever adopted it) closed it.
        Closed = "closed" => Closed,
        /// Its pane went away.
        Gone = "gone" => Gone,
    }
}

impl HireEnd {
    /// Whether a record's wire `ended` says the hire is still open.
    pub fn open(ended: i32) -> bool {
        ended == clankie_proto::mailbox::v1::HireEnd::Unspecified as i32
    }
}

crate::closed_set! {
    /// Whether a hire's seat may be handed deliveries.
    pub enum HireReadiness as clankie_proto::mailbox::v1::HireReadiness {
        /// Its seat polled ready.
        Ready = "ready" => Ready,
        /// Its seat has not polled yet.
        Pending = "pending" => Pending,
        /// Its seat is refused or not what the hire needs (the reason says
        /// which).
        Failed = "failed" => Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_shown_are_the_strings_they_were() {
        assert_eq!(HireEnd::WORDS, ["closed", "gone"]);
        assert_eq!(HireEnd::wire_word(0), "", "open");
        assert!(HireEnd::open(0) && !HireEnd::open(HireEnd::Gone.wire()));
        assert_eq!(HireReadiness::WORDS, ["ready", "pending", "failed"]);
    }
}
