//! The words of a seat's diagnostics (seed 003, "Native discovery and
//! diagnostics"): what `clankie doctor` and the roster say of a seat's
//! bridge. Observations only: none of them grants or denies a tool.

crate::closed_set! {
    /// A seat bridge's start against the running service's.
    pub enum BridgeFreshness as clankie_proto::mailbox::v1::BridgeFreshness {
        /// The bridge started after the running service did.
        Current = "current" => Current,
        /// The bridge started before the running service: a reload hint,
        /// even after a same-build restart, never proof of an old build.
        OlderThanRuntime = "older-than-runtime" => OlderThanRuntime,
        /// A start-time fact is missing, or no bridge polled.
        Unknown = "unknown" => Unknown,
    }
}

crate::closed_set! {
    /// What the diagnostic saw of a seat's native tools.
    pub enum NativeTools as clankie_proto::mailbox::v1::NativeTools {
        /// No bridge catalog was inspected (none polled, or its harness
        /// polls for itself and names none).
        NotVerified = "not-verified" => NotVerified,
        /// The current bridge reported what the settings serve.
        Verified = "verified" => Verified,
        /// The current bridge reported something else (see the missing tools).
        Mismatch = "mismatch" => Mismatch,
    }
}

crate::closed_set! {
    /// A seat's standing for project policy. Unproven never denies fleet
    /// tools: project proof decides eligibility, not membership.
    pub enum Eligibility as clankie_proto::mailbox::v1::Eligibility {
        /// Hired into a project.
        Project = "project" => Project,
        /// No project proof (a seat started by hand, or unsupported).
        Unproven = "unproven" => Unproven,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_are_the_seeds() {
        assert_eq!(
            BridgeFreshness::WORDS,
            ["current", "older-than-runtime", "unknown"]
        );
        assert_eq!(NativeTools::WORDS, ["not-verified", "verified", "mismatch"]);
        assert_eq!(Eligibility::WORDS, ["project", "unproven"]);
    }
}
