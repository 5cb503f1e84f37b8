//! The closed words of mcp-host's views: how an account's server is reached,
//! where a grant stands, and which budget class a tracker call counts in.
//! The CLI and the gateway print the words; the wire carries
//! `mcphost.v1` enums.

crate::closed_set! {
    /// How mcp-host reaches an account's server.
    pub enum TransportKind as clankie_proto::mcphost::v1::TransportKind {
        /// A child process speaking MCP on its stdin and stdout.
        Stdio = "stdio" => Stdio,
        /// A streamable HTTP endpoint.
        Http = "http" => Http,
    }
}

crate::closed_set! {
    /// Where a grant stands at a moment (computed, never stored).
    pub enum GrantStanding as clankie_proto::mcphost::v1::GrantStanding {
        Active = "active" => Active,
        Expired = "expired" => Expired,
        Revoked = "revoked" => Revoked,
        /// The account's identity changed after issue.
        Invalidated = "invalidated" => Invalidated,
        /// Not a manual grant: inspectable, confers nothing.
        Retired = "retired" => Retired,
    }
}

crate::closed_set! {
    /// The budget class a tracker call counts in: each class has its own
    /// windows, so background work cannot starve the interactive seat.
    pub enum BudgetClass as clankie_proto::mcphost::v1::BudgetClass {
        Interactive = "interactive" => Interactive,
        Background = "background" => Background,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_shown_are_the_strings_they_were() {
        assert_eq!(TransportKind::WORDS, ["stdio", "http"]);
        assert_eq!(
            GrantStanding::WORDS,
            ["active", "expired", "revoked", "invalidated", "retired"]
        );
        assert_eq!(BudgetClass::WORDS, ["interactive", "background"]);
    }
}
