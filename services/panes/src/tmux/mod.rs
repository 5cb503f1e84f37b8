//! tmux as a pane host: reads through a control-mode client (`control`),
//! and the acts a hire needs, one `tmux` command each (`act`).
//!
//! A read names a pane's id, `pane_pid` (the pane's shell) and its
//! foreground command, against a given server socket (`tmux -S SOCKET`).

mod act;
mod control;
mod watch;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub use act::{close, live, open, session};
pub use control::{Block, BlockReader, parse_tmux};
use control::{Control, TMUX_FORMAT};
pub use watch::{Notice, notice, pane_list};

use crate::host::{Pane, PaneError, PaneHost, READ_TIMEOUT};
use crate::map::PaneMap;

/// A tmux server, optionally narrowed to one session.
///
/// Reads go through one long-lived control-mode client (`tmux -C
/// attach-session -f read-only,ignore-size,no-output`), so a pane read is a
/// line on a pipe, not a process; if that client cannot run, each read falls
/// back to one `tmux list-panes` process.
///
/// Reads that wait for the client together are answered together: a read
/// waiting behind another takes the next listing of the whole scope, and
/// every read that asked before that listing began shares it. Each answer
/// still comes from tmux after its read was asked, so none is older than a
/// read of its own would be; a burst of N reads (a catalog change relisted
/// by every seat) costs two listings instead of N.
#[derive(Debug, Clone)]
pub struct Tmux {
    pub socket: PathBuf,
    pub session: Option<String>,
    control: std::sync::Arc<tokio::sync::Mutex<Option<Control>>>,
    shared: std::sync::Arc<SharedReads>,
    /// The linked session's pane map, kept by a watching client started at
    /// the first use (`watch`).
    map: std::sync::Arc<PaneMap>,
    watching: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// The reads asked so far, and the last whole listing with the number of
/// reads asked before it began.
#[derive(Debug, Default)]
struct SharedReads {
    asked: AtomicU64,
    listed: AtomicU64,
    last: parking_lot::Mutex<Option<(u64, Vec<Pane>)>>,
}

impl Tmux {
    pub fn new(socket: impl Into<PathBuf>, session: Option<String>) -> Self {
        Tmux {
            socket: socket.into(),
            session,
            control: Default::default(),
            shared: Default::default(),
            map: Default::default(),
            watching: Default::default(),
        }
    }

    /// The session's pane map, its watcher started on first use. None for
    /// a link to a whole server: tmux tells a control client about its own
    /// session's windows only.
    pub fn map(&self) -> Option<&PaneMap> {
        let session = self.session.as_ref().filter(|s| sane(s))?;
        // Checked before it is swapped: most calls find it set, and a read
        // costs no write to the shared line.
        if !self.watching.load(Ordering::Relaxed) && !self.watching.swap(true, Ordering::SeqCst) {
            match tokio::runtime::Handle::try_current() {
                Ok(_) => watch::spawn(
                    self.socket.clone(),
                    session.clone(),
                    std::sync::Arc::downgrade(&self.map),
                ),
                Err(_) => self.watching.store(false, Ordering::SeqCst),
            }
        }
        Some(&self.map)
    }

    /// How many reads have been asked so far.
    pub fn reads(&self) -> u64 {
        self.shared.asked.load(Ordering::SeqCst)
    }

    /// How many listings the control client has answered so far.
    pub fn listings(&self) -> u64 {
        self.shared.listed.load(Ordering::Relaxed)
    }
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
        if self.session.as_deref().is_none_or(sane) {
            // This read's number, taken before it waits for the client.
            let ticket = self.shared.asked.fetch_add(1, Ordering::SeqCst) + 1;
            let mut slot = match self.control.try_lock() {
                Ok(slot) => slot,
                Err(_) => {
                    let slot = tokio::time::timeout(READ_TIMEOUT, self.control.lock())
                        .await
                        .map_err(|_| PaneError::Unavailable("tmux_timeout"))?;
                    // It waited: a listing that began after it asked answers it.
                    if let Some((began, panes)) = self.shared.last.lock().as_ref()
                        && *began >= ticket
                    {
                        return Ok(only(panes, target));
                    }
                    slot
                }
            };
            // A read that waited lists the whole scope, for the reads queued
            // behind it; an uncontended one lists just its target.
            let whole = target.is_some() && self.shared.asked.load(Ordering::SeqCst) > ticket;
            let began = self.shared.asked.load(Ordering::SeqCst);
            let asking = if whole { None } else { target };
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
                    tokio::time::timeout(READ_TIMEOUT, control.command(&self.command_line(asking)))
                        .await
                        .ok()
                        .flatten();
                self.shared.listed.fetch_add(1, Ordering::Relaxed);
                match answer {
                    Some(Block::Ok(lines)) => {
                        let panes = self.keep(lines.iter().filter_map(|l| parse_tmux(l)));
                        if asking.is_none() {
                            *self.shared.last.lock() = Some((began, panes.clone()));
                        }
                        return Ok(only(&panes, target));
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

/// A session name safe to put on a tmux command line.
fn sane(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// The panes a read asked for: `target`'s alone (not found: none), or all.
fn only(panes: &[Pane], target: Option<&str>) -> Vec<Pane> {
    match target {
        Some(t) => panes.iter().filter(|p| p.pane_id == t).cloned().collect(),
        None => panes.to_vec(),
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
