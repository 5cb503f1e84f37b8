//! The key that says whose something is (an MCP session, a receipt).
//!
//! It is built only from what admission proved: the fleet, the link that
//! admitted the request and, for a local proof, the pane. Two bearer links of
//! one fleet are two principals; two connections from one pane are one.

use clankie_proto::common::v1::Principal;

/// The owner key of a proven principal.
///
/// A relayed principal's link is `machine:NAME`, so the same pane id on two
/// machines is two owners, and the key keeps the spelling receipts written
/// before relays existed were stored under.
pub fn owner_key(p: &Principal) -> String {
    format!("{}:{}:{}:{}", p.mode, p.fleet_id, p.link_id, p.pane_id)
}

/// The principal as an actor of the audit and the tracker:
/// `fleet:F:pane:P`, `fleet:F:pane:unverified` for a bearer, and
/// `fleet:F:machine:M:pane:P` for a pane a remote machine proved, so a pane
/// id on a machine is never taken for the same id on this stack.
pub fn actor(p: &Principal) -> String {
    let pane = if p.pane_id.is_empty() {
        "unverified"
    } else {
        p.pane_id.as_str()
    };
    if p.machine.is_empty() {
        format!("fleet:{}:pane:{pane}", p.fleet_id)
    } else {
        format!("fleet:{}:machine:{}:pane:{pane}", p.fleet_id, p.machine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machines_pane_is_its_own_actor() {
        let here = Principal {
            fleet_id: "f".into(),
            pane_id: "%3".into(),
            ..Default::default()
        };
        let there = Principal {
            machine: "pc".into(),
            ..here.clone()
        };
        assert_eq!(actor(&here), "fleet:f:pane:%3");
        assert_eq!(actor(&there), "fleet:f:machine:pc:pane:%3");
        let bearer = Principal {
            fleet_id: "f".into(),
            ..Default::default()
        };
        assert_eq!(actor(&bearer), "fleet:f:pane:unverified");
    }
    use clankie_proto::common::v1::AdmissionMode;

    #[test]
    fn bearer_links_of_one_fleet_are_different_owners_and_a_pane_is_one() {
        let bearer = |link: &str| Principal {
            fleet_id: "f".into(),
            link_id: link.into(),
            mode: AdmissionMode::Bearer as i32,
            ..Default::default()
        };
        assert_ne!(owner_key(&bearer("a")), owner_key(&bearer("b")));
        let pane = Principal {
            fleet_id: "f".into(),
            link_id: "l".into(),
            pane_id: "%1".into(),
            mode: AdmissionMode::Local as i32,
            ..Default::default()
        };
        assert_eq!(owner_key(&pane), owner_key(&pane.clone()));
        assert_ne!(
            owner_key(&pane),
            owner_key(&Principal {
                pane_id: "%2".into(),
                ..pane
            })
        );
    }
}
