//! The sizes a member's arguments may have. The tool schemas state them
//! (derived in [`super::args`]), and the service that owns each field
//! refuses past them.

/// A report's or a peer message's text (bytes of UTF-8).
pub const MESSAGE_TEXT: usize = 32 << 10;
/// A self-wake's note.
pub const WAKE_NOTE: usize = 2048;
/// A tool name, qualified (`account_tool`) or not.
pub const TOOL_NAME: usize = 256;
/// A `clankie_tools` search query.
pub const SEARCH_QUERY: usize = 1024;
/// How many tools one `clankie_tools` description names.
pub const DESCRIBED_TOOLS: usize = 10;
/// A receipt id.
pub const RECEIPT_ID: usize = super::receipt::MAX_LEN;
