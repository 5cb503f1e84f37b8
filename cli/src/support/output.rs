//! Text for the owner's terminal. Agent output (transcripts, titles a lead
//! wrote, pane names) can carry escape sequences that would move the
//! cursor, retitle the window or fake a prompt; every control character is
//! shown as an escape instead (`\u{1b}`), never sent to the terminal.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

/// `-q`: only errors, and what a command was asked for (a token, JSON).
static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A progress or status line (`clankie is up`, `stopped`), which `-q`
/// keeps off the terminal.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        if !$crate::support::output::quiet() {
            println!($($arg)*);
        }
    };
}

/// One line of a table: no newline or tab inside a field either.
pub fn field(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control()) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if c.is_control() {
                    format!("\\u{{{:x}}}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// Pretty JSON for a terminal. serde_json escapes C0 controls inside
/// strings but writes DEL and the C1 controls (U+0080..U+009F, CSI among
/// them) raw; those can only occur inside strings, so they become `\u`
/// escapes and the text stays the same JSON value.
pub fn json_text(v: &serde_json::Value) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return text;
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Prints JSON for a terminal (see [`json_text`]).
pub fn print_json(v: &serde_json::Value) {
    println!("{}", json_text(v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_never_reach_the_terminal() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(field("csi\u{9b}31m"), "csi\\u{9b}31m");
        assert_eq!(field("two\nlines"), "two\\u{a}lines");
    }

    #[test]
    fn json_stays_the_same_value_without_raw_controls() {
        let v = serde_json::json!({ "text": "x\u{1b}]0;owned\u{7}y\u{9b}z\u{7f}" });
        let text = json_text(&v);
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(back, v);
    }
}
