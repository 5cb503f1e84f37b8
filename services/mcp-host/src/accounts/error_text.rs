//! An upstream failure as words an operator reads (an account's
//! `lastError`, `clankie connect`): rmcp names its transports by their Rust
//! types and an upstream may answer with a web page, neither of which says
//! what went wrong or what to try.

/// `text` without bracketed Rust type names and with an HTML page said,
/// not shown.
pub(crate) fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let inner = &rest[open..];
        match matching_bracket(inner) {
            // `Transport [a::B<c::D>] error` → `Transport error`.
            Some(close) if inner[..close].contains("::") => {
                rest = inner[close + 1..]
                    .strip_prefix(' ')
                    .unwrap_or(&inner[close + 1..]);
                if out.ends_with(' ') && rest.starts_with(' ') {
                    rest = &rest[1..];
                }
            }
            Some(close) => {
                out.push_str(&inner[..=close]);
                rest = &inner[close + 1..];
            }
            None => {
                out.push_str(inner);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    let lower = out.to_ascii_lowercase();
    if let Some(at) = ["<!doctype", "<html", "<head", "<body"]
        .iter()
        .filter_map(|tag| lower.find(tag))
        .min()
    {
        out.truncate(at);
        out.push_str("(an HTML page, not an MCP answer)");
    }
    out
}

/// For an HTTP upstream that refused MCP at its URL's path: the URL to try,
/// when the path is not already `/mcp`.
pub(super) fn url_hint(url: &str, error: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let path = parsed.path().trim_end_matches('/');
    if path.ends_with("/mcp") || !error.contains("HTTP ") {
        return None;
    }
    let mut better = parsed.clone();
    better.set_path(&format!("{path}/mcp"));
    Some(format!(
        "; MCP servers over HTTP usually answer at a path such as /mcp: try {better}"
    ))
}

/// The index of the `]` that closes the `[` at the start of `s`.
fn matching_bracket(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_type_names_are_dropped_and_other_brackets_kept() {
        let e = "initialize failed: Send message error Transport [clankie_runtime::mcp_tap::Tap<rmcp::transport::worker::WorkerTransport<a::B<c::D>>>] error: HTTP 501, when send initialize request";
        assert_eq!(
            plain(e),
            "initialize failed: Send message error Transport error: HTTP 501, when send initialize request"
        );
        assert_eq!(plain("a [b] c"), "a [b] c");
        assert_eq!(plain("unclosed [x::y"), "unclosed [x::y");
        assert_eq!(plain("nested [a::[b]] end"), "nested end");
        assert_eq!(plain("]] stray ["), "]] stray [");
    }

    #[test]
    fn an_html_page_is_said_not_shown() {
        let e = "HTTP 404: <!DOCTYPE HTML><html><body><h1>Not Found</h1></body></html>";
        assert_eq!(plain(e), "HTTP 404: (an HTML page, not an MCP answer)");
    }

    #[test]
    fn a_url_without_mcp_gets_the_url_to_try() {
        assert_eq!(
            url_hint("http://127.0.0.1:8/", "error: HTTP 501").as_deref(),
            Some(
                "; MCP servers over HTTP usually answer at a path such as /mcp: try http://127.0.0.1:8/mcp"
            )
        );
        assert_eq!(url_hint("http://h/api/mcp", "HTTP 404"), None);
        assert_eq!(url_hint("http://h/api", "timed out"), None);
        assert!(
            url_hint("https://h/api/", "HTTP 405")
                .is_some_and(|h| h.ends_with("https://h/api/mcp"))
        );
    }
}
