//! The pane actions the mailbox takes on a linked session (tmux or Herdr):
//! open a hired pane, close it, list the live ones. A link that is not
//! local (a bearer) has no panes to act on.

use clankie_panes::ActError;
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
pub(crate) async fn live(link: &admission_pb::FleetLink) -> Result<Vec<String>, ActError> {
    match LinkKind::from_wire(link.kind) {
        Some(LinkKind::Tmux) => clankie_panes::tmux::live(&link.socket).await,
        Some(LinkKind::Herdr) => {
            clankie_panes::herdr::live(std::path::Path::new(&link.socket)).await
        }
        Some(LinkKind::Bearer) | None => Err(not_local()),
    }
}
