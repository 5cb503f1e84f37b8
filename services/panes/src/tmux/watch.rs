//! Keeps a linked tmux session's [`PaneMap`] current from tmux's own
//! notifications: one more read-only control client, which sends no
//! commands after it subscribes and only listens.
//!
//! What removes entries:
//! - `%layout-change`, `%window-close` and `%unlinked-window-close` forget
//!   that window's panes at once (a pane split off, closed, moved, joined
//!   or broken out; a window closed or unlinked);
//! - a subscription to the session's whole pane list (`#{W:#{P:...}}`),
//!   which tmux re-evaluates at most once a second, forgets every entry
//!   whose pane is not in the list or has another process there: what no
//!   notification names, such as a window swapped with another session's
//!   (`swap-window`) or a pane respawned;
//! - the session renamed, our client moved to another session, the stream
//!   ending, or any line the watcher does not recognise forget everything,
//!   and all but the last end the client (a new one attaches by name).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::net::unix::pipe;

use crate::map::PaneMap;

/// What one control-mode line means for the map.
#[derive(Debug, PartialEq, Eq)]
pub enum Notice<'a> {
    /// Nothing a pane's shell or membership depends on.
    Keep,
    /// These lines frame a command's answer.
    Begin,
    End,
    /// A command failed (a tmux without subscriptions): this client
    /// cannot see every change.
    Failed,
    /// A window's panes changed: forget them.
    Window(&'a str),
    /// Our client is now attached to this session (`$id`, name).
    Session(&'a str, &'a str),
    /// A session (`$id`) now has this name.
    Renamed(&'a str, &'a str),
    /// The session's pane list, as `%PANE=PID` words.
    Panes(&'a str),
    /// The client is detaching.
    Exit,
    /// Anything else: forget everything.
    Unknown,
}

/// The subscription's name and format: every pane of the attached session
/// with its process.
const SUBSCRIPTION: &str = "clankie-panes";
const PANE_LIST: &str = "#{W:#{P:#{pane_id}=#{pane_pid} }}";

/// Classifies one line tmux wrote to the watching client. This faces a
/// process we do not control, so it is fuzzed (`fuzz_targets/pane_lines.rs`).
pub fn notice(line: &str) -> Notice<'_> {
    let mut words = line.split(' ');
    let kind = words.next().unwrap_or("");
    let arg = |i: usize| line.split(' ').nth(i).unwrap_or("");
    match kind {
        "%begin" => Notice::Begin,
        "%end" => Notice::End,
        "%error" => Notice::Failed,
        "%layout-change" | "%window-close" | "%unlinked-window-close" => match arg(1) {
            w if w.starts_with('@') => Notice::Window(w),
            _ => Notice::Unknown,
        },
        "%session-changed" => Notice::Session(arg(1), line.splitn(3, ' ').nth(2).unwrap_or("")),
        "%session-renamed" => Notice::Renamed(arg(1), line.splitn(3, ' ').nth(2).unwrap_or("")),
        "%subscription-changed" if arg(1) == SUBSCRIPTION => match line.split_once(" : ") {
            Some((_, value)) => Notice::Panes(value),
            None => Notice::Unknown,
        },
        "%exit" => Notice::Exit,
        "%window-add"
        | "%unlinked-window-add"
        | "%window-renamed"
        | "%unlinked-window-renamed"
        | "%window-pane-changed"
        | "%session-window-changed"
        | "%sessions-changed"
        | "%pane-mode-changed"
        | "%paste-buffer-changed"
        | "%paste-buffer-deleted"
        | "%client-session-changed"
        | "%client-detached"
        | "%message"
        | "%config-error"
        | "%output"
        | "%extended-output"
        | "%continue"
        | "%pause" => Notice::Keep,
        _ => Notice::Unknown,
    }
}

/// The `%PANE=PID` words of a pane list.
pub fn pane_list(value: &str) -> HashMap<&str, &str> {
    value
        .split(' ')
        .filter_map(|w| w.split_once('='))
        .filter(|(p, _)| p.starts_with('%'))
        .collect()
}

/// Keeps `map` current for `session` on the server at `socket` for as long
/// as the map is held elsewhere; restarts the client a second after it
/// ends.
pub(super) fn spawn(socket: PathBuf, session: String, map: Weak<PaneMap>) {
    tokio::spawn(async move {
        loop {
            let Some(held) = map.upgrade() else { return };
            watch_once(&socket, &session, &held).await;
            held.down();
            drop(held);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// One watching client, until it ends or must be replaced.
async fn watch_once(socket: &Path, session: &str, map: &Arc<PaneMap>) {
    let mut cmd = tokio::process::Command::new("tmux");
    cmd.arg("-S")
        .arg(socket)
        .args(["-C", "attach-session", "-t", session])
        // The reading client's flags in another order, so that `ps` (and a
        // test holding tmux's words back) can tell the two apart.
        .args(["-f", "no-output,read-only,ignore-size"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let Ok(mut child) = cmd.spawn() else { return };
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return;
    };
    // Written from the reader, so the subscription goes only once the
    // attach has answered (`subscribe`).
    let Ok(stdin) = stdin.into_owned_fd() else {
        return;
    };
    let Some((pipe, probe)) = nonblocking(stdout) else {
        return;
    };
    let mut reader = Reader {
        map,
        session,
        ours: None,
        blocks: 0,
        stdin: std::fs::File::from(stdin),
        subscribed: false,
        listed: false,
        probe: Some(probe),
    };
    crate::events::read_lines(&pipe, map, |line| reader.apply(line)).await;
}

/// The client's stdout as a pipe tokio can wait on without reading, and a
/// second descriptor of it for the map's unread-bytes check.
fn nonblocking(stdout: tokio::process::ChildStdout) -> Option<(pipe::Receiver, OwnedFd)> {
    let fd = stdout.into_owned_fd().ok()?;
    let probe = fd.try_clone().ok()?;
    Some((pipe::Receiver::from_owned_fd(fd).ok()?, probe))
}

/// Applies lines to the map in order.
struct Reader<'a> {
    map: &'a PaneMap,
    session: &'a str,
    /// Our session's `$id`, once tmux has named it.
    ours: Option<String>,
    /// Command answers seen (the attach's, then the subscription's).
    blocks: u32,
    /// The client's stdin, where the subscription is written; kept open,
    /// since closing it ends the client.
    stdin: std::fs::File,
    subscribed: bool,
    /// Whether tmux has sent the session's pane list once.
    listed: bool,
    /// Handed to the map once the stream is read to its start.
    probe: Option<OwnedFd>,
}

impl Reader<'_> {
    /// Applies one line; false when this client must end.
    fn apply(&mut self, line: &str) -> bool {
        match notice(line) {
            Notice::Keep | Notice::Begin => {}
            Notice::End => self.blocks += 1,
            Notice::Failed => return false,
            Notice::Window(w) => self.map.forget_window(w),
            Notice::Session(id, name) => {
                if name != self.session || self.ours.as_ref().is_some_and(|o| o != id) {
                    return false;
                }
                self.ours = Some(id.to_string());
                self.map.forget_everything();
                if !self.subscribe() {
                    return false;
                }
            }
            Notice::Renamed(id, name) => {
                self.map.forget_everything();
                if self.ours.as_deref() == Some(id) && name != self.session {
                    return false;
                }
            }
            // Held against the map itself, not the last list: the first
            // list comes up to a second after the client attached.
            Notice::Panes(value) => {
                self.map.forget_unlisted(&pane_list(value));
                self.listed = true;
            }
            Notice::Exit => return false,
            Notice::Unknown => self.map.forget_everything(),
        }
        // Both our commands answered, tmux named our session and sent its
        // pane list: from here on every change reaches us.
        if self.blocks >= 2
            && self.ours.is_some()
            && self.listed
            && let Some(probe) = self.probe.take()
        {
            self.map.up(probe);
        }
        true
    }

    /// Subscribes to the session's pane list, once. Only after the attach
    /// has answered: tmux takes a `refresh-client -B` that reaches it
    /// before, answers it as done, and then never sends the list (seen on
    /// tmux 3.4, about one start in six). False when it cannot be written.
    fn subscribe(&mut self) -> bool {
        use std::io::Write as _;
        if self.subscribed {
            return true;
        }
        self.subscribed = true;
        let line = format!("refresh-client -B '{SUBSCRIPTION}::{PANE_LIST}'\n");
        // A short line to a pipe tmux reads: it does not block.
        self.stdin.write_all(line.as_bytes()).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The subscription goes out only once tmux has named our session, and
    /// the map goes live only once the first pane list has arrived: a
    /// subscription tmux took too early never sends one, and a map live
    /// without it would keep a swapped pane forever.
    #[test]
    fn the_map_goes_live_only_after_the_attach_and_the_first_pane_list() {
        let sent = std::env::temp_dir().join(format!("clankie-watch-{}", std::process::id()));
        let map = PaneMap::default();
        let (probe, _) = rustix::pipe::pipe().expect("pipe");
        let mut reader = Reader {
            map: &map,
            session: "work",
            ours: None,
            blocks: 0,
            stdin: std::fs::File::create(&sent).expect("stdin"),
            subscribed: false,
            listed: false,
            probe: Some(probe),
        };
        let written = || std::fs::read_to_string(&sent).expect("sent");
        for line in ["%begin 1 2 0", "%end 1 2 0"] {
            assert!(reader.apply(line));
        }
        assert_eq!(written(), "", "nothing before tmux names the session");
        assert!(reader.apply("%session-changed $0 work"));
        assert!(written().starts_with("refresh-client -B 'clankie-panes::"));
        for line in ["%begin 1 3 1", "%end 1 3 1"] {
            assert!(reader.apply(line));
        }
        assert_eq!(map.begin_read(), None, "not live before the first list");
        assert!(reader.apply("%subscription-changed clankie-panes $0 - - - : %0=12 "));
        assert!(map.begin_read().is_some(), "live after it");
        // A second session-changed for our session does not subscribe twice.
        assert!(reader.apply("%session-changed $0 work"));
        assert_eq!(written().matches("refresh-client").count(), 1);
        let _ = std::fs::remove_file(&sent);
    }

    #[test]
    fn notices_name_what_they_change_and_junk_forgets_everything() {
        assert_eq!(
            notice("%layout-change @4 b25e,80x24,0,0,1 b25e,80x24,0,0,1 *"),
            Notice::Window("@4")
        );
        assert_eq!(notice("%unlinked-window-close @1"), Notice::Window("@1"));
        assert_eq!(notice("%window-close x"), Notice::Unknown);
        assert_eq!(
            notice("%session-changed $0 my work"),
            Notice::Session("$0", "my work")
        );
        assert_eq!(
            notice("%subscription-changed clankie-panes $0 - - - : %0=3782 %3=3807 "),
            Notice::Panes("%0=3782 %3=3807 ")
        );
        assert_eq!(
            notice("%subscription-changed other $0 - - - : x"),
            Notice::Unknown
        );
        assert_eq!(notice("%window-add @9"), Notice::Keep);
        assert_eq!(notice("%something-new @1"), Notice::Unknown);
        assert_eq!(notice(""), Notice::Unknown);
        let list = pane_list("%0=3782 junk %3=3807 =1 ");
        assert_eq!(list.len(), 2);
        assert_eq!(list.get("%3"), Some(&"3807"));
    }
}
