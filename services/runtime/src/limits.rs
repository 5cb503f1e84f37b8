//! Sizes the edges agree on, so a bridge can stop reading where the service
//! would refuse.

/// The largest review candidate patch (bytes of `git diff --binary`). The
/// bridge stops reading the diff here; the mailbox refuses anything larger.
pub const MAX_CANDIDATE_PATCH: usize = 4 << 20;

/// The largest body of a review submission on the gateway: the patch in
/// base64 plus room for the summary, evidence and names.
pub const MAX_CANDIDATE_BODY: usize = MAX_CANDIDATE_PATCH / 3 * 4 + 4 + (64 << 10);

/// The largest gRPC message a review submission or read needs.
pub const MAX_CANDIDATE_MESSAGE: usize = MAX_CANDIDATE_PATCH + (1 << 20);

/// Lengths of the fields a caller names, checked at the gateway before
/// anything is forwarded (bytes of UTF-8).
pub mod field {
    /// A receipt id (the rule is `clankie_types::fleet::receipt`'s).
    pub const RECEIPT_ID: usize = clankie_types::fleet::receipt::MAX_LEN;
    /// A tool name, qualified (`account_tool`) or not.
    pub const TOOL_NAME: usize = clankie_types::fleet::limits::TOOL_NAME;
    /// An account name (the owner names accounts; members name them only
    /// inside qualified tool names).
    pub const ACCOUNT_NAME: usize = 40;
    /// An `mcp-session-id` header.
    pub const SESSION_ID: usize = 128;
    /// A JSON-RPC `id`, as JSON text (a string's quotes included).
    pub const JSONRPC_ID: usize = 130;
    /// A `clankie_tools` search query.
    pub const SEARCH_QUERY: usize = clankie_types::fleet::limits::SEARCH_QUERY;
    /// A path segment naming a pane, peer message or review candidate.
    pub const PATH_SEGMENT: usize = 256;
}

/// The longest refusal message carried on a gRPC status. A status travels
/// in HTTP/2 trailers, and a header block past the peer's limit resets the
/// whole connection, with every other caller's calls on it: caller text is
/// never echoed unbounded.
pub const MAX_STATUS_MESSAGE: usize = 1024;

/// The longest structured details carried beside a refusal.
pub const MAX_STATUS_DETAILS: usize = 2048;

/// Cuts `text` to at most `max` bytes on a character boundary, marking the
/// cut with an ellipsis.
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}...", &text[..end]))
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_keeps_short_text_and_cuts_long_text_on_a_boundary() {
        assert_eq!(clip("short", 10), "short");
        let long = "é".repeat(100);
        let cut = clip(&long, 11);
        assert!(cut.len() <= 11, "{cut}");
        assert!(cut.ends_with("..."));
        assert!(cut.starts_with("éééé"));
    }
}
