//! Pane hosts: the multiplexers whose panes can be admitted. One trait, two
//! backends.
//!
//! - **tmux**, against a given server socket (`tmux -S SOCKET`): pane id,
//!   `pane_pid` (the pane's shell) and the foreground command.
//! - **Herdr**, over its newline-delimited JSON socket API: `pane.get`,
//!   `pane.process_info` (`shell_pid`), `pane_not_found`. Reads go straight to
//!   the socket, never through a CLI process.
//!
//! What a pane host reports is a claim to be bracketed by kernel
//! observations; environment hints inside panes (`HERDR_PANE_ID`, `TMUX_PANE`)
//! are never trusted.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// How long one pane-host read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// One pane as its host reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    pub pane_id: String,
    pub session: String,
    pub shell_pid: i32,
    pub command: String,
}

/// Why a pane host could not answer. Fixed vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneError {
    /// The host answered that the pane does not exist.
    NotFound,
    /// The host could not be reached or answered nonsense.
    Unavailable(&'static str),
}

/// A multiplexer that can name a pane's shell.
pub trait PaneHost: Send + Sync {
    /// Reads one pane fresh.
    fn pane(
        &self,
        pane_id: &str,
    ) -> impl std::future::Future<Output = Result<Pane, PaneError>> + Send;
    /// Reads every pane of the linked session fresh.
    fn panes(&self) -> impl std::future::Future<Output = Result<Vec<Pane>, PaneError>> + Send;
}

/// A tmux server, optionally narrowed to one session.
///
/// Reads go through one long-lived control-mode client (`tmux -C
/// attach-session -f read-only,ignore-size,no-output`), so a pane read is a
/// line on a pipe, not a process; if that client cannot run, each read falls
/// back to one `tmux list-panes` process.
#[derive(Debug, Clone)]
pub struct Tmux {
    pub socket: PathBuf,
    pub session: Option<String>,
    control: std::sync::Arc<tokio::sync::Mutex<Option<Control>>>,
}

impl Tmux {
    pub fn new(socket: impl Into<PathBuf>, session: Option<String>) -> Self {
        Tmux {
            socket: socket.into(),
            session,
            control: Default::default(),
        }
    }
}

/// A control-mode client: commands in, `%begin`/`%end` blocks out.
#[derive(Debug)]
struct Control {
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
    async fn start(socket: &std::path::Path, session: Option<&str>) -> Option<Control> {
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

    async fn command(&mut self, line: &str) -> Option<Block> {
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

const TMUX_FORMAT: &str = "#{session_name}\t#{pane_id}\t#{pane_pid}\t#{pane_current_command}";

/// One `list-panes` line in [`TMUX_FORMAT`]; None for anything else.
pub fn parse_tmux(line: &str) -> Option<Pane> {
    let mut f = line.split('\t');
    let session = f.next()?.to_string();
    let pane_id = f.next()?.to_string();
    let shell_pid = f.next()?.parse().ok()?;
    let command = f.next().unwrap_or("").to_string();
    pane_id.starts_with('%').then_some(Pane {
        pane_id,
        session,
        shell_pid,
        command,
    })
}

impl Tmux {
    fn command_line(&self, target: Option<&str>) -> String {
        let scope = match (target, &self.session) {
            (Some(t), _) => format!("-t {t}"),
            (None, Some(s)) => format!("-s -t '{s}'"),
            (None, None) => "-a".to_string(),
        };
        format!("list-panes {scope} -F \"{TMUX_FORMAT}\"")
    }

    fn keep(&self, panes: impl Iterator<Item = Pane>) -> Vec<Pane> {
        panes
            .filter(|p| self.session.as_ref().is_none_or(|s| &p.session == s))
            .collect()
    }

    async fn list(&self, target: Option<&str>) -> Result<Vec<Pane>, PaneError> {
        let sane_session = self.session.as_deref().is_none_or(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        });
        if sane_session {
            let mut slot = tokio::time::timeout(READ_TIMEOUT, self.control.lock())
                .await
                .map_err(|_| PaneError::Unavailable("tmux_timeout"))?;
            for _ in 0..2 {
                if slot.is_none() {
                    *slot = tokio::time::timeout(
                        READ_TIMEOUT,
                        Control::start(&self.socket, self.session.as_deref()),
                    )
                    .await
                    .ok()
                    .flatten();
                }
                let Some(control) = slot.as_mut() else { break };
                let answer =
                    tokio::time::timeout(READ_TIMEOUT, control.command(&self.command_line(target)))
                        .await
                        .ok()
                        .flatten();
                match answer {
                    Some(Block::Ok(lines)) => {
                        return Ok(self.keep(lines.iter().filter_map(|l| parse_tmux(l))));
                    }
                    Some(Block::Error(e)) if target.is_some() && e.contains("can't find") => {
                        return Err(PaneError::NotFound);
                    }
                    Some(Block::Error(_)) => return Err(PaneError::Unavailable("tmux_failed")),
                    // The control client died (server restarted?): start another once.
                    None => *slot = None,
                }
            }
        }
        self.list_by_process(target).await
    }

    /// One `tmux list-panes` process per read: the fallback.
    async fn list_by_process(&self, target: Option<&str>) -> Result<Vec<Pane>, PaneError> {
        let mut cmd = tokio::process::Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).arg("list-panes");
        match (target, &self.session) {
            (Some(t), _) => cmd.args(["-t", t]),
            (None, Some(s)) => cmd.args(["-s", "-t", s]),
            (None, None) => cmd.arg("-a"),
        };
        cmd.args(["-F", TMUX_FORMAT])
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(READ_TIMEOUT, cmd.output())
            .await
            .map_err(|_| PaneError::Unavailable("tmux_timeout"))?
            .map_err(|_| PaneError::Unavailable("tmux_unavailable"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if target.is_some() && (err.contains("can't find") || err.contains("not found")) {
                return Err(PaneError::NotFound);
            }
            return Err(PaneError::Unavailable("tmux_failed"));
        }
        Ok(self.keep(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(parse_tmux),
        ))
    }
}

impl PaneHost for Tmux {
    async fn pane(&self, pane_id: &str) -> Result<Pane, PaneError> {
        // Pane ids are `%` and digits; nothing else ever reaches tmux.
        let digits = &pane_id[pane_id.len().min(1)..];
        if !pane_id.starts_with('%')
            || digits.is_empty()
            || digits.len() > 10
            || !digits.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(PaneError::NotFound);
        }
        let panes = self.list(Some(pane_id)).await?;
        panes
            .into_iter()
            .find(|p| p.pane_id == pane_id)
            .ok_or(PaneError::NotFound)
    }

    async fn panes(&self) -> Result<Vec<Pane>, PaneError> {
        self.list(None).await
    }
}

/// A Herdr server's socket API.
#[derive(Debug, Clone)]
pub struct Herdr {
    pub socket: PathBuf,
}

impl Herdr {
    /// The socket path in Herdr's own search order.
    pub fn discover() -> Option<PathBuf> {
        clankie_runtime::paths::herdr_socket()
    }

    /// Sends one request and reads its response line.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, PaneError> {
        use clankie_runtime::herdr::{HerdrError, request};
        request(&self.socket, method, params, READ_TIMEOUT)
            .await
            .map_err(|e| match e {
                HerdrError::PaneNotFound => PaneError::NotFound,
                HerdrError::Refused(_) => PaneError::Unavailable("herdr_error"),
                HerdrError::Unavailable(r) => PaneError::Unavailable(r),
            })
    }
}

/// A pane from Herdr's `pane.process_info` answer.
pub fn herdr_pane(pane_id: &str, session: String, proc: &Value) -> Result<Pane, PaneError> {
    let p = &proc["process_info"];
    let shell_pid = p["shell_pid"]
        .as_i64()
        .and_then(|v| i32::try_from(v).ok())
        .filter(|pid| *pid > 0)
        .ok_or(PaneError::Unavailable("herdr_malformed"))?;
    let command = p["foreground_processes"][0]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    Ok(Pane {
        pane_id: pane_id.to_string(),
        session,
        shell_pid,
        command,
    })
}

impl PaneHost for Herdr {
    async fn pane(&self, pane_id: &str) -> Result<Pane, PaneError> {
        let info = self
            .request("pane.get", json!({ "pane_id": pane_id }))
            .await?;
        let session = info["pane"]["workspace_id"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let proc = self
            .request("pane.process_info", json!({ "pane_id": pane_id }))
            .await?;
        herdr_pane(pane_id, session, &proc)
    }

    async fn panes(&self) -> Result<Vec<Pane>, PaneError> {
        let list = self.request("pane.list", json!({})).await?;
        let ids: Vec<String> = list["panes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["pane_id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.pane(&id).await {
                Ok(p) => out.push(p),
                Err(PaneError::NotFound) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmux_lines_parse_and_reject_junk() {
        assert_eq!(
            parse_tmux("work\t%3\t4242\tbash"),
            Some(Pane {
                pane_id: "%3".into(),
                session: "work".into(),
                shell_pid: 4242,
                command: "bash".into(),
            })
        );
        assert_eq!(parse_tmux("work\t3\t4242\tbash"), None);
        assert_eq!(parse_tmux("work\t%3\tx\tbash"), None);
        assert_eq!(parse_tmux(""), None);
    }
}
