//! The closed words of landing review: where a candidate stands and what a
//! reviewer decides. On disk (`mailbox/reviews.json`) each is the word it
//! was when it was a string.

crate::closed_set! {
    /// Where a landing review candidate stands.
    pub enum ReviewState as clankie_proto::mailbox::v1::ReviewState {
        /// Waiting for a verdict.
        Pending = "pending" => Pending,
        /// The reviewer approved this exact patch.
        Approved = "approved" => Approved,
        /// The reviewer asked for changes, with findings.
        Changes = "changes" => Changes,
    }
}

crate::closed_set! {
    /// A reviewer's decision.
    pub enum Verdict as clankie_proto::mailbox::v1::Verdict {
        Approve = "approve" => Approve,
        Changes = "changes" => Changes,
    }
}

impl Verdict {
    /// The state a candidate takes when this verdict is given.
    pub fn state(self) -> ReviewState {
        match self {
            Verdict::Approve => ReviewState::Approved,
            Verdict::Changes => ReviewState::Changes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_on_disk_are_the_strings_they_were() {
        assert_eq!(ReviewState::WORDS, ["pending", "approved", "changes"]);
        assert_eq!(Verdict::WORDS, ["approve", "changes"]);
        assert_eq!(Verdict::Approve.state(), ReviewState::Approved);
        assert_eq!(Verdict::Changes.state(), ReviewState::Changes);
    }
}
