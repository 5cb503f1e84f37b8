//! Waiting for what a scenario expects: the one poll ([`eventually`])
//! and the file readers built on it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Waits until a file holds the line `line`.
pub async fn wait_file_line(path: &Path, line: &str, timeout: Duration) -> bool {
    let seen = async || file_lines(path).iter().any(|l| l == line).then_some(());
    eventually(timeout, seen).await.is_some()
}

/// Waits until a file holds at least `count` lines.
pub async fn wait_file_lines(path: &Path, count: usize, timeout: Duration) -> bool {
    let seen = async || (file_lines(path).len() >= count).then_some(());
    eventually(timeout, seen).await.is_some()
}

/// Lines of a file (missing: none).
pub fn file_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits until `path` holds a JSON document, or `timeout` passes.
pub async fn wait_json(path: &Path, timeout: Duration) -> Option<Value> {
    eventually(timeout, async || {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    })
    .await
}

/// How often [`eventually`] asks again.
const POLL: Duration = Duration::from_millis(50);

/// The one poll of the scenarios: asks `probe` until it answers `Some`,
/// every 50 ms, for at most `within` (asked once more at the end). A
/// timeout is a patience, never a measurement: tests assert what happened,
/// not how fast.
pub async fn eventually<T>(
    within: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let end = Instant::now() + within;
    loop {
        let last = Instant::now() >= end;
        if let Some(v) = probe().await {
            return Some(v);
        }
        if last {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}
