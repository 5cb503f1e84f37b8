//! The pane actions the mailbox takes on a linked session (tmux or Herdr):
//! open a hired pane, close it, list the live ones. A link that is not
//! local (a bearer) has no panes to act on.

use clankie_panes::{ActError, Listed};
use clankie_proto::admission::v1 as admission_pb;
use clankie_types::LinkKind;

/// Opens a hired pane in a linked session (tmux or Herdr).
pub(crate) async fn open(
    link: &admission_pb::FleetLink,
    cwd: &str,
    env: &[(&str, String)],
    command: &[String],
) -> Result<String, ActError> {
    match LinkKind::from_wire(link.kind) {
        Some(LinkKind::Herdr) => {
            let socket = std::path::Path::new(&link.socket);
            clankie_panes::herdr::open(socket, &link.session, cwd, env, command).await
        }
        Some(LinkKind::Tmux) => {
            let session = clankie_panes::tmux::session(&link.socket, &link.session).await?;
            clankie_panes::tmux::open(&link.socket, &session, cwd, env, command).await
        }
        Some(LinkKind::Bearer) | None => Err(not_local()),
    }
}

fn not_local() -> ActError {
    ActError("not a local link".into())
}

/// Closes a hired pane.
pub(crate) async fn close(link: &admission_pb::FleetLink, pane: &str) -> Result<(), ActError> {
    match LinkKind::from_wire(link.kind) {
        Some(LinkKind::Herdr) => {
            clankie_panes::herdr::close(std::path::Path::new(&link.socket), pane).await
        }
        Some(LinkKind::Tmux) => clankie_panes::tmux::close(&link.socket, pane).await,
        Some(LinkKind::Bearer) | None => Err(not_local()),
    }
}

/// Live panes of a linked session.
pub(crate) async fn live(link: &admission_pb::FleetLink) -> Result<Vec<Listed>, ActError> {
    match LinkKind::from_wire(link.kind) {
        Some(LinkKind::Tmux) => clankie_panes::tmux::live(&link.socket).await,
        Some(LinkKind::Herdr) => {
            clankie_panes::herdr::live(std::path::Path::new(&link.socket)).await
        }
        Some(LinkKind::Bearer) | None => Err(not_local()),
    }
}

/// What one sweep listed: the live panes of each pane host that answered,
/// and when the listing began.
pub(crate) struct Listing {
    began_ms: i64,
    live: std::collections::HashMap<String, Vec<Listed>>,
}

impl Listing {
    pub(crate) fn new(began_ms: i64) -> Listing {
        Listing {
            began_ms,
            live: Default::default(),
        }
    }

    pub(crate) fn listed(&mut self, link_id: String, panes: Vec<Listed>) {
        self.live.insert(link_id, panes);
    }

    /// Whether the host says the agent in a live pane is done: None when
    /// the host did not answer or did not list the pane.
    pub(crate) fn agent_done(&self, link_id: &str, pane_id: &str) -> Option<bool> {
        self.live
            .get(link_id)?
            .iter()
            .find(|p| p.pane_id == pane_id)
            .map(|p| p.agent_done)
    }

    /// Whether the pane of a record made at `recorded_ms` is closed. Only
    /// when its host answered, the pane was not in the answer, and the
    /// record is older than the listing: a record made since may hold a
    /// pane opened after its host was listed (a hire records its pane while
    /// the sweep waits for the lock). A host that did not answer knows
    /// nothing, and unknown is never gone.
    pub(crate) fn closed(&self, link_id: &str, pane_id: &str, recorded_ms: i64) -> bool {
        recorded_ms < self.began_ms
            && self
                .live
                .get(link_id)
                .is_some_and(|panes| !panes.iter().any(|p| p.pane_id == pane_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_older_record_whose_host_answered_without_its_pane_is_closed() {
        let mut l = Listing::new(1_000);
        l.listed(
            "tmux".into(),
            vec![Listed {
                pane_id: "%1".into(),
                agent_done: false,
            }],
        );
        assert!(!l.closed("tmux", "%1", 10), "listed: live");
        assert!(l.closed("tmux", "%2", 10), "older and absent: closed");
        assert!(
            !l.closed("tmux", "%2", 1_000),
            "recorded as the listing began"
        );
        assert!(
            !l.closed("tmux", "%2", 1_500),
            "recorded since: its pane may be newer"
        );
        assert!(
            !l.closed("herdr", "%2", 10),
            "a host that did not answer knows nothing"
        );
        assert_eq!(l.agent_done("tmux", "%1"), Some(false));
        assert_eq!(l.agent_done("tmux", "%2"), None, "not listed: unknown");
    }
}
