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

#[cfg(test)]
mod tests {
    use super::*;
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
