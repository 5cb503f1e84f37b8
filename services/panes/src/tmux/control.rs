//! tmux's control mode: one long-lived read-only client per linked server,
//! answering each command with a `%begin`/`%end` (or `%error`) block, and
//! the line format pane reads ask for. The parsers here face a process we
//! do not control, so they are fuzzed (`fuzz_targets/pane_lines.rs`).

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::host::Pane;

/// A control-mode client: commands in, `%begin`/`%end` blocks out.
#[derive(Debug)]
pub(super) struct Control {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

/// What one control-mode command answered.
pub enum Block {
    Ok(Vec<String>),
    Error(String),
}

impl Control {
    pub(super) async fn start(socket: &std::path::Path, session: Option<&str>) -> Option<Control> {
        let mut cmd = tokio::process::Command::new("tmux");
        cmd.arg("-S").arg(socket).args(["-C", "attach-session"]);
        if let Some(s) = session {
            cmd.args(["-t", s]);
        }
        cmd.args(["-f", "read-only,ignore-size,no-output"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().ok()?;
        let stdin = child.stdin.take()?;
        let lines = BufReader::new(child.stdout.take()?).lines();
        let mut control = Control {
            _child: child,
            stdin,
            lines,
        };
        // The attach command answers with its own block first.
        match control.read_block().await? {
            Block::Ok(_) => Some(control),
            Block::Error(_) => None,
        }
    }

    async fn read_block(&mut self) -> Option<Block> {
        let mut block = BlockReader::default();
        loop {
            let line = self.lines.next_line().await.ok()??;
            if let Some(done) = block.feed(line) {
                return Some(done);
            }
        }
    }

    pub(super) async fn command(&mut self, line: &str) -> Option<Block> {
        self.stdin.write_all(line.as_bytes()).await.ok()?;
        self.stdin.write_all(b"\n").await.ok()?;
        self.stdin.flush().await.ok()?;
        self.read_block().await
    }
}

/// Reads one tmux control-mode answer, a line at a time: everything
/// between `%begin` and `%end` (or `%error`). Notifications between blocks
/// (`%session-changed`, `%window-add`, ...) are skipped.
#[derive(Default)]
pub struct BlockReader {
    inside: bool,
    lines: Vec<String>,
    bytes: usize,
}

/// The most a block may hold before it counts as an error (a pane list is
/// a few KiB).
const MAX_BLOCK: usize = 4 << 20;

impl BlockReader {
    /// Takes one line; returns the block once it ends.
    pub fn feed(&mut self, line: String) -> Option<Block> {
        if !self.inside {
            self.inside = line.starts_with("%begin ");
            return None;
        }
        if line.starts_with("%end ") {
            return Some(Block::Ok(std::mem::take(&mut self.lines)));
        }
        if line.starts_with("%error ") {
            return Some(Block::Error(std::mem::take(&mut self.lines).join(" ")));
        }
        self.bytes += line.len();
        if self.bytes > MAX_BLOCK {
            return Some(Block::Error("the answer is too long".into()));
        }
        self.lines.push(line);
        None
    }
}

pub(super) const TMUX_FORMAT: &str =
    "#{session_name}\t#{pane_id}\t#{pane_pid}\t#{window_id}\t#{pane_current_command}";

/// One `list-panes` line in [`TMUX_FORMAT`]; None for anything else.
pub fn parse_tmux(line: &str) -> Option<Pane> {
    let mut f = line.split('\t');
    let session = f.next()?.to_string();
    let pane_id = f.next()?.to_string();
    let shell_pid = f.next()?.parse().ok()?;
    let window = f.next()?.to_string();
    // The rest is the command, whatever it holds.
    let command = f.collect::<Vec<_>>().join("\t");
    (pane_id.starts_with('%') && window.starts_with('@')).then_some(Pane {
        pane_id,
        session,
        shell_pid,
        window,
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmux_lines_parse_and_reject_junk() {
        assert_eq!(
            parse_tmux("work\t%3\t4242\t@1\tbash"),
            Some(Pane {
                pane_id: "%3".into(),
                session: "work".into(),
                shell_pid: 4242,
                window: "@1".into(),
                command: "bash".into(),
            })
        );
        assert_eq!(parse_tmux("work\t3\t4242\t@1\tbash"), None);
        assert_eq!(parse_tmux("work\t%3\tx\t@1\tbash"), None);
        assert_eq!(parse_tmux("work\t%3\t4242\tbash"), None);
        assert_eq!(parse_tmux(""), None);
    }
}
