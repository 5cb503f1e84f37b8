//! A pane host's pane → shell map, kept current from the host's own event
//! stream, so a proof whose shell the map knows does no pane-host read.
//!
//! The map never learns a pane from the host's word alone. An entry is
//! recorded from a fresh pane read that a proof bracketed with kernel
//! observations, and it holds the shell's kernel identity (pid, pidfs id,
//! start time) and its controlling terminal. A proof may use an entry only
//! when the kernel shows that very shell alive and still holding that
//! terminal, and only after checking that the entry survived every event
//! the host has written so far (`holds`).
//!
//! The host's events remove entries: a window whose panes changed loses
//! its entries, and anything the watcher does not recognise forgets them
//! all. While the event stream is down the map is not live: it records
//! nothing and answers nothing. Why a stale entry cannot admit is in
//! `docs/SECURITY.md`, "The pane map".

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A pane's shell as the kernel identified it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shell {
    pub pid: i32,
    pub pidfs_id: u64,
    pub start_time: u64,
    /// The controlling terminal's device number; never 0 in an entry.
    pub tty: i32,
}

/// One entry found in the map, to be confirmed by [`PaneMap::holds`].
#[derive(Debug, Clone)]
pub struct Hit {
    pub pane_id: String,
    pub shell: Shell,
    stamp: u64,
}

#[derive(Debug)]
struct Entry {
    window: String,
    shell: Shell,
    stamp: u64,
}

#[derive(Debug, Default)]
struct State {
    /// The event stream is up and has been read to its start.
    live: bool,
    /// Bumped by every removal: a read begun under an older epoch may have
    /// seen what an event since took back, so it is not recorded.
    epoch: u64,
    stamps: u64,
    panes: HashMap<String, Entry>,
    shells: HashMap<i32, String>,
    /// A second descriptor of the event pipe's read end, to ask the kernel
    /// whether bytes the host wrote are still unread.
    pipe: Option<OwnedFd>,
}

/// The map for one pane host.
#[derive(Debug, Default)]
pub struct PaneMap {
    state: parking_lot::Mutex<State>,
    /// Set by the watcher from just before it reads the pipe until it has
    /// applied what it read.
    applying: AtomicBool,
    hits: AtomicU64,
}

impl PaneMap {
    /// The epoch to pass to [`record`](Self::record), taken before a fresh
    /// pane read; None while the map is not live.
    pub fn begin_read(&self) -> Option<u64> {
        let state = self.state.lock();
        state.live.then_some(state.epoch)
    }

    /// Records a pane's shell found by a fresh read begun at `began`, unless
    /// anything was removed since (or the map went down), or the shell holds
    /// no terminal.
    pub fn record(&self, began: Option<u64>, pane_id: &str, window: &str, shell: Shell) {
        let mut state = self.state.lock();
        if !state.live || began != Some(state.epoch) || shell.tty == 0 {
            return;
        }
        state.stamps += 1;
        let stamp = state.stamps;
        if let Some(old) = state.panes.remove(pane_id) {
            state.shells.remove(&old.shell.pid);
        }
        if let Some(other) = state.shells.insert(shell.pid, pane_id.to_string()) {
            state.panes.remove(&other);
        }
        state.panes.insert(
            pane_id.to_string(),
            Entry {
                window: window.to_string(),
                shell,
                stamp,
            },
        );
    }

    /// The entry whose shell has this pid.
    pub fn by_shell(&self, pid: i32) -> Option<Hit> {
        let state = self.state.lock();
        let pane = state.shells.get(&pid)?;
        hit(&state, pane)
    }

    /// The entry for this pane.
    pub fn by_pane(&self, pane_id: &str) -> Option<Hit> {
        let state = self.state.lock();
        hit(&state, pane_id)
    }

    /// Whether `hit` is still in the map after everything the host has
    /// written so far. Call it after the kernel observation it completes.
    ///
    /// The order matters: the pipe is empty, then the watcher is not
    /// holding bytes it read but has not applied, then the entry is there.
    /// Anything the host wrote before the first check is either applied by
    /// the last one or makes one of the first two fail.
    pub fn holds(&self, hit: &Hit) -> bool {
        let unread = {
            let state = self.state.lock();
            match &state.pipe {
                Some(pipe) => rustix::io::ioctl_fionread(pipe).unwrap_or(1),
                None => return false,
            }
        };
        if unread > 0 || self.applying.load(Ordering::SeqCst) {
            return false;
        }
        let state = self.state.lock();
        let held = state.live
            && state
                .panes
                .get(&hit.pane_id)
                .is_some_and(|e| e.stamp == hit.stamp);
        if held {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        held
    }

    /// How many proofs the map has answered so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// How many panes the map knows.
    pub fn len(&self) -> usize {
        self.state.lock().panes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The watcher has read the stream to its start: entries may be
    /// recorded from now on.
    pub(crate) fn up(&self, pipe: OwnedFd) {
        let mut state = self.state.lock();
        forget_all(&mut state);
        state.pipe = Some(pipe);
        state.live = true;
    }

    /// The event stream ended: forget everything and answer nothing.
    pub(crate) fn down(&self) {
        let mut state = self.state.lock();
        forget_all(&mut state);
        state.live = false;
        state.pipe = None;
    }

    /// The watcher is about to read the pipe, or has applied what it read.
    pub(crate) fn applying(&self, on: bool) {
        self.applying.store(on, Ordering::SeqCst);
    }

    /// A window's panes changed (or it closed): forget its entries.
    pub(crate) fn forget_window(&self, window: &str) {
        self.forget_where(|_, e| e.window == window);
    }

    /// A pane closed, exited, moved or changed: forget it.
    pub(crate) fn forget_pane(&self, pane_id: &str) {
        self.forget_where(|pane, _| pane == pane_id);
    }

    /// The host listed the session's panes (pane → process pid): forget
    /// every entry whose pane is not listed with its shell.
    pub(crate) fn forget_unlisted(&self, listed: &HashMap<&str, &str>) {
        self.forget_where(|pane, e| {
            listed.get(pane).and_then(|pid| pid.parse::<i32>().ok()) != Some(e.shell.pid)
        });
    }

    /// Forgets the entries `gone` picks, and moves the epoch on either way.
    fn forget_where(&self, gone: impl Fn(&str, &Entry) -> bool) {
        let mut state = self.state.lock();
        state.epoch += 1;
        let picked: Vec<String> = state
            .panes
            .iter()
            .filter(|(p, e)| gone(p, e))
            .map(|(p, _)| p.clone())
            .collect();
        for pane in picked {
            if let Some(e) = state.panes.remove(&pane) {
                state.shells.remove(&e.shell.pid);
            }
        }
    }

    /// Something changed that the watcher cannot place: forget everything.
    pub(crate) fn forget_everything(&self) {
        forget_all(&mut self.state.lock());
    }
}

fn forget_all(state: &mut State) {
    state.epoch += 1;
    state.panes.clear();
    state.shells.clear();
}

fn hit(state: &State, pane_id: &str) -> Option<Hit> {
    if !state.live {
        return None;
    }
    let e = state.panes.get(pane_id)?;
    Some(Hit {
        pane_id: pane_id.to_string(),
        shell: e.shell.clone(),
        stamp: e.stamp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(pid: i32) -> Shell {
        Shell {
            pid,
            pidfs_id: 100 + pid as u64,
            start_time: 7,
            tty: 34816,
        }
    }

    /// A live map, and both ends of its event pipe.
    fn live() -> (PaneMap, (OwnedFd, OwnedFd)) {
        let map = PaneMap::default();
        let (read, write) = rustix::pipe::pipe().expect("pipe");
        map.up(read.try_clone().expect("dup"));
        (map, (read, write))
    }

    #[test]
    fn a_read_begun_before_a_removal_is_not_recorded() {
        let (map, _w) = live();
        let began = map.begin_read();
        map.forget_window("@9");
        map.record(began, "%1", "@1", shell(10));
        assert!(map.by_pane("%1").is_none());
        map.record(map.begin_read(), "%1", "@1", shell(10));
        assert!(map.by_shell(10).is_some_and(|h| map.holds(&h)));
    }

    #[test]
    fn a_window_change_forgets_its_panes_and_an_old_hit_no_longer_holds() {
        let (map, _w) = live();
        map.record(map.begin_read(), "%1", "@1", shell(10));
        map.record(map.begin_read(), "%2", "@2", shell(20));
        let old = map.by_pane("%1").expect("hit");
        map.forget_window("@1");
        assert!(!map.holds(&old));
        assert!(map.by_shell(10).is_none());
        assert!(map.by_pane("%2").is_some_and(|h| map.holds(&h)));
    }

    #[test]
    fn unread_events_or_a_stream_that_ended_hold_nothing() {
        let (map, (r, w)) = live();
        map.record(map.begin_read(), "%1", "@1", shell(10));
        let hit = map.by_pane("%1").expect("hit");
        rustix::io::write(&w, b"%layout-change @1\n").expect("write");
        assert!(!map.holds(&hit), "bytes wait unread in the pipe");
        let mut buf = [0u8; 64];
        rustix::io::read(&r, &mut buf).expect("read");
        map.applying(true);
        assert!(!map.holds(&hit), "read but not yet applied");
        map.applying(false);
        assert!(map.holds(&hit));
        map.down();
        assert!(map.by_pane("%1").is_none());
        map.record(map.begin_read(), "%1", "@1", shell(10));
        assert!(map.is_empty(), "nothing is recorded while down");
    }

    #[test]
    fn no_terminal_no_entry_and_a_reused_shell_pid_moves_its_entry() {
        let (map, _w) = live();
        map.record(
            map.begin_read(),
            "%1",
            "@1",
            Shell {
                tty: 0,
                ..shell(10)
            },
        );
        assert!(map.is_empty());
        map.record(map.begin_read(), "%1", "@1", shell(10));
        map.record(map.begin_read(), "%2", "@1", shell(10));
        assert!(map.by_pane("%1").is_none());
        assert_eq!(map.by_shell(10).map(|h| h.pane_id), Some("%2".into()));
    }
}
