//! A stdio server's stderr: every line goes to the account's own log
//! (`logs/accounts/NAME.log`, 0600, rotated at a size cap), and its last
//! lines are kept so an account that cannot start says why in its error.
//! Neither reaches the services' own logs: what a server prints is its own
//! business and may name paths or secrets.

use std::collections::VecDeque;
use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

/// The lines kept for the account's error.
const TAIL_LINES: usize = 6;
/// The longest line kept there (the log keeps it whole).
const TAIL_LINE_MAX: usize = 300;
/// The log's size cap before it rotates, and the rotated files kept.
const LOG_MAX_BYTES: usize = 1 << 20;
const LOG_KEEP: usize = 2;

/// One connection attempt's stderr, as far as it has been read.
pub(super) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    ended: watch::Receiver<bool>,
    ended_tx: Option<watch::Sender<bool>>,
}

impl StderrTail {
    pub(super) fn new() -> Self {
        let (tx, rx) = watch::channel(false);
        StderrTail {
            lines: Arc::default(),
            ended: rx,
            ended_tx: Some(tx),
        }
    }

    /// Reads the child's stderr until it closes, line by line, into `log`
    /// and the tail. A log that cannot be opened loses the file copy only.
    pub(super) fn attach(&mut self, stderr: tokio::process::ChildStderr, log: PathBuf) {
        let Some(ended) = self.ended_tx.take() else {
            return;
        };
        let lines = self.lines.clone();
        let Ok(fd) = stderr.into_owned_fd() else {
            return;
        };
        tokio::task::spawn_blocking(move || {
            let mut file = log
                .parent()
                .map(clankie_runtime::state::private_dir)
                .and_then(Result::ok)
                .map(|_| {
                    file_rotate::FileRotate::new(
                        &log,
                        file_rotate::suffix::AppendCount::new(LOG_KEEP),
                        file_rotate::ContentLimit::BytesSurpassed(LOG_MAX_BYTES),
                        file_rotate::compression::Compression::None,
                        Some(0o600),
                    )
                });
            let mut reader = std::io::BufReader::new(std::fs::File::from(fd));
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if let Some(f) = file.as_mut() {
                    let _ = f.write_all(&buf);
                }
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end();
                if line.is_empty() {
                    continue;
                }
                let mut kept = lines.lock();
                if kept.len() == TAIL_LINES {
                    kept.pop_front();
                }
                kept.push_back(cut(line));
            }
            if let Some(f) = file.as_mut() {
                let _ = f.flush();
            }
            let _ = ended.send(true);
        });
    }

    /// The last lines, once the stream ended or `wait` passed (a server
    /// that failed has usually exited, so its stderr ends at once). Empty
    /// for a transport without stderr.
    pub(super) async fn last(&self, wait: Duration) -> String {
        if self.ended_tx.is_none() {
            let mut ended = self.ended.clone();
            let _ = tokio::time::timeout(wait, ended.wait_for(|e| *e)).await;
        }
        let kept = self.lines.lock();
        kept.iter().cloned().collect::<Vec<_>>().join(" | ")
    }
}

/// A line cut to [`TAIL_LINE_MAX`] bytes at a character boundary.
fn cut(line: &str) -> String {
    if line.len() <= TAIL_LINE_MAX {
        return line.to_string();
    }
    let mut end = TAIL_LINE_MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// An account error with what the server last printed, if anything.
pub(super) fn with_tail(error: &str, tail: &str) -> String {
    if tail.is_empty() {
        error.to_string()
    } else {
        format!("{error}; the server's stderr ended with: {tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_line_reaches_the_log_and_the_last_ones_the_error() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("accounts").join("gh.log");
        let mut child = tokio::process::Command::new("sh")
            .args([
                "-c",
                "for i in 1 2 3 4 5 6 7 8; do echo line $i >&2; done; echo 'GITHUB_TOKEN is not set' >&2; exit 1",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let mut tail = StderrTail::new();
        tail.attach(child.stderr.take().expect("stderr"), log.clone());
        let _ = child.wait().await;
        let last = tail.last(Duration::from_secs(10)).await;
        assert_eq!(
            last,
            "line 4 | line 5 | line 6 | line 7 | line 8 | GITHUB_TOKEN is not set"
        );
        let written = std::fs::read_to_string(&log).expect("log");
        assert_eq!(written.lines().count(), 9, "{written}");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&log).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            with_tail("initialize failed", &last),
            format!("initialize failed; the server's stderr ended with: {last}")
        );
        assert_eq!(with_tail("x", ""), "x");
        assert_eq!(cut(&"é".repeat(200)).len(), 300 + "…".len());
    }
}
