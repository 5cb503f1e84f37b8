//! MCP logging levels as the wire names them, in the order RFC 5424 gives
//! them, so a session's chosen level can be compared with a line's.

/// The eight MCP levels, least severe first.
pub const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A level's severity (0 for debug); `None` for a name MCP does not define.
pub fn rank(level: &str) -> Option<u8> {
    LEVELS.iter().position(|l| *l == level).map(|i| i as u8)
}

/// Whether a line at `line` reaches a reader that chose `chosen`. An
/// unknown line level reaches nobody: it cannot be placed.
pub fn reaches(line: &str, chosen: &str) -> bool {
    matches!((rank(line), rank(chosen)), (Some(l), Some(c)) if l >= c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_unknown_names() {
        assert_eq!(rank("debug"), Some(0));
        assert_eq!(rank("emergency"), Some(7));
        assert_eq!(rank("Warning"), None);
        assert!(reaches("error", "warning"));
        assert!(reaches("warning", "warning"));
        assert!(!reaches("info", "warning"));
        assert!(!reaches("loud", "debug"));
        assert!(!reaches("error", ""));
    }
}
