//! A Herdr worker's pane presence at startup (seed 003, "Fleet admission"):
//! when Herdr answers exactly `pane_not_found` for the pane this bridge was
//! told it runs in (a pre-warmed spare that inherited an obsolete pane id,
//! say), the worker stays unclaimed: no seat channel, no deliveries. Any
//! other answer, an unreachable Herdr included, is unknown, and the
//! service's own kernel proof still decides. A tmux pane is not asked.

use clankie_panes::herdr::Herdr;
use clankie_panes::host::PaneError;
use serde_json::json;

/// Whether Herdr says, exactly, that the bridge's Herdr pane does not exist.
pub(crate) async fn herdr_pane_missing() -> bool {
    if std::env::var_os("TMUX_PANE").is_some_and(|p| !p.is_empty()) {
        return false;
    }
    let Some(pane) = std::env::var("HERDR_PANE_ID")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        return false;
    };
    let Some(socket) = Herdr::discover() else {
        return false;
    };
    matches!(
        Herdr::new(socket)
            .request("pane.get", json!({ "pane_id": pane }))
            .await,
        Err(PaneError::NotFound)
    )
}
