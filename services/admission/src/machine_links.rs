//! Which remote machines have their relay stream up now.
//!
//! The gateway holds the stream with the machine, and holds a
//! `HoldMachineLink` call open here for exactly as long: the link is up
//! while that call lives. Kept in memory only: after a restart of
//! admission every link is down until its machine reconnects, which is the
//! fail-closed reading. A machine has one link at a time; a newer one
//! replaces the older, which is then ended.

use std::collections::HashMap;

use clankie_proto::admission::v1 as admission_pb;
use parking_lot::Mutex;
use tokio::sync::watch;

/// One machine's link as last seen.
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    /// Which hold is current (each open takes a new number).
    holder: u64,
    up: bool,
    since_ms: i64,
    rtt_ms: u32,
    in_flight: u32,
}

/// Every machine's link, and a signal each time the machines or their
/// links change (holds listen to it to learn they were removed or
/// replaced).
pub struct MachineLinks {
    links: Mutex<HashMap<String, Link>>,
    next: Mutex<u64>,
    changed: watch::Sender<u64>,
}

impl Default for MachineLinks {
    fn default() -> Self {
        MachineLinks {
            links: Mutex::new(HashMap::new()),
            next: Mutex::new(0),
            changed: watch::channel(0).0,
        }
    }
}

impl MachineLinks {
    /// Marks `machine`'s link up under a new hold; answers the hold's
    /// number. An older hold of the same machine learns it was replaced.
    pub fn open(&self, machine: &str, now_ms: i64) -> u64 {
        let holder = {
            let mut next = self.next.lock();
            *next += 1;
            *next
        };
        self.links.lock().insert(
            machine.to_string(),
            Link {
                holder,
                up: true,
                since_ms: now_ms,
                rtt_ms: 0,
                in_flight: 0,
            },
        );
        self.touch();
        holder
    }

    /// Whether `holder` is `machine`'s current hold.
    pub fn current(&self, machine: &str, holder: u64) -> bool {
        self.links
            .lock()
            .get(machine)
            .is_some_and(|l| l.holder == holder && l.up)
    }

    /// `machine`'s current hold, while its link is up.
    pub fn holder(&self, machine: &str) -> Option<u64> {
        self.links
            .lock()
            .get(machine)
            .filter(|l| l.up)
            .map(|l| l.holder)
    }

    /// Records what `holder`'s stream last reported: its round-trip time
    /// and the relayed requests being served.
    pub fn report(&self, machine: &str, holder: u64, rtt_ms: u32, in_flight: u32) {
        if let Some(l) = self.links.lock().get_mut(machine)
            && l.holder == holder
        {
            l.rtt_ms = rtt_ms;
            l.in_flight = in_flight;
        }
    }

    /// Marks `machine`'s link down, if `holder` is still its hold.
    pub fn close(&self, machine: &str, holder: u64, now_ms: i64) {
        if let Some(l) = self.links.lock().get_mut(machine)
            && l.holder == holder
            && l.up
        {
            l.up = false;
            l.since_ms = now_ms;
        }
    }

    /// How many links are up now.
    pub fn up(&self) -> u64 {
        self.links.lock().values().filter(|l| l.up).count() as u64
    }

    /// Forgets a removed machine's link.
    pub fn forget(&self, machine: &str) {
        self.links.lock().remove(machine);
    }

    /// Tells every hold that the machines changed (one was removed,
    /// replaced, or its file changed).
    pub fn touch(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver of [`MachineLinks::touch`].
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// `m` with its link as known now.
    pub fn fill(&self, m: &mut admission_pb::Machine) {
        if let Some(l) = self.links.lock().get(&m.name) {
            m.link_up = l.up;
            m.link_since_ms = l.since_ms;
            m.link_rtt_ms = if l.up { l.rtt_ms } else { 0 };
            m.link_in_flight = if l.up { l.in_flight } else { 0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_hold_replaces_the_older_and_only_the_current_one_closes_the_link() {
        let links = MachineLinks::default();
        let first = links.open("pc", 10);
        links.report("pc", first, 7, 2);
        let mut m = admission_pb::Machine {
            name: "pc".into(),
            ..Default::default()
        };
        links.fill(&mut m);
        assert!(m.link_up && m.link_since_ms == 10 && m.link_rtt_ms == 7 && m.link_in_flight == 2);
        let second = links.open("pc", 20);
        assert!(!links.current("pc", first) && links.current("pc", second));
        links.close("pc", first, 30);
        links.fill(&mut m);
        assert!(m.link_up, "the older hold ending leaves the newer link up");
        links.close("pc", second, 40);
        links.fill(&mut m);
        assert!(!m.link_up && m.link_since_ms == 40 && m.link_rtt_ms == 0);
    }
}
