//! A hire's readiness. A hired pane's deliveries wait until its seat first
//! polls ready: the seat is the harness the hire launched (the exact
//! launcher's Claude, else `launcher_mismatch` at the seat proof), its
//! bridge offers what the fleet settings enable (the two meta tools while
//! `fleet.tools` is connected and neither while off, `message_clankie`
//! always, the peer tools while peer messages are on: else
//! `bridge_tools_mismatch`), and a Claude was started with the worker
//! plugin's channel (else `channel_unavailable`: its deliveries would be
//! dropped unseen, and nothing is ever typed into the pane instead). The
//! reason is kept on the hire for the lead and `clankie hire --wait-ready`.

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::common::v1::FleetTools;
use clankie_runtime::ClankieError;
use clankie_types::fleet::{Family, FleetTool};

use crate::codex_seats::{CodexSeat, Proc};
use crate::rpc::callers::Observed;
use crate::store::{HireRec, now_ms};
use crate::{MailboxService, internal};

/// The channel a Claude hire's session must have been started with.
const CLAUDE_CHANNEL: &str = "plugin:clankie-worker@clankie";

/// Why a hire's seat is not ready, or nothing.
pub(crate) fn judge(
    hire: &HireRec,
    tools: &[String],
    settings: &admission_pb::FleetSettings,
    agent_argv: &[String],
) -> Result<(), &'static str> {
    if hire.harness == "claude"
        && !agent_argv
            .windows(2)
            .any(|w| w[0] == "--channels" && w[1] == CLAUDE_CHANNEL)
    {
        return Err("channel_unavailable");
    }
    // A harness polling for itself (Pi's extension) names no tools.
    if tools.is_empty() {
        return Ok(());
    }
    // Readiness judges the families every seat's bridge decides alike; the
    // review and lead tools depend on the project and hire, not the bridge.
    let judged = [Family::Meta, Family::Report, Family::Peers];
    let mismatch = FleetTool::ALL
        .into_iter()
        .filter(|t| judged.contains(&t.family()))
        .any(|t| tools.iter().any(|n| n == t.name()) != serves(t.family(), settings, Extra::NONE));
    if mismatch {
        return Err("bridge_tools_mismatch");
    }
    Ok(())
}

/// The seat-dependent families a seat is served beyond the settings.
#[derive(Clone, Copy)]
pub(crate) struct Extra {
    /// Its project names a standing reviewer.
    pub reviews: bool,
    /// It holds a lead hire.
    pub lead: bool,
}

impl Extra {
    const NONE: Extra = Extra {
        reviews: false,
        lead: false,
    };
}

/// Whether a seat is served a family's tools under these settings.
fn serves(family: Family, settings: &admission_pb::FleetSettings, extra: Extra) -> bool {
    match family {
        Family::Meta => settings.tools == FleetTools::Connected as i32,
        Family::Report => true,
        Family::Peers => settings.peer_messages,
        Family::Review => extra.reviews,
        Family::Lead => extra.lead,
    }
}

/// The fleet tools a seat's bridge is served now, by name.
pub(crate) fn served(settings: &admission_pb::FleetSettings, extra: Extra) -> Vec<&'static str> {
    FleetTool::ALL
        .into_iter()
        .filter(|t| serves(t.family(), settings, extra))
        .map(FleetTool::name)
        .collect()
}

impl MailboxService {
    /// Judges the seat of a pane's live hire at its poll: whether its
    /// deliveries may go now. A seat started by hand has no hire to wait for.
    pub(crate) async fn ready(
        &self,
        observed: &Observed,
        tools: &[String],
    ) -> Result<bool, ClankieError> {
        let seat = &observed.seat;
        let mut store = self.inner.store.lock().await;
        let Some(h) = store.state.hire_in(&seat.link_id, &seat.pane_id) else {
            return Ok(true);
        };
        if h.ready_at_ms != 0 {
            return Ok(true);
        }
        let h = h.clone();
        let mut verdict = judge(&h, tools, &observed.settings, &observed.agent_argv);
        // A Codex hire's registration is completed as it becomes ready.
        if verdict.is_ok() && h.harness == "codex" {
            match observed.owner_parent {
                None => verdict = Err("codex_server_unseen"),
                Some(server) => {
                    let registration = CodexSeat {
                        hire_id: h.hire_id.clone(),
                        link_id: seat.link_id.clone(),
                        pane_id: seat.pane_id.clone(),
                        server,
                        occupant: Proc {
                            pid: seat.agent_pid,
                            pidfs_id: seat.agent_pidfs_id,
                            start_time: seat.agent_start_time,
                        },
                        registered_at_ms: now_ms(),
                    };
                    self.inner
                        .codex_seats
                        .lock()
                        .await
                        .register(registration)
                        .map_err(internal)?;
                    tracing::info!(hire = %h.hire_id, "mailbox.hire.codex_registered");
                }
            }
        }
        let (ready_at_ms, not_ready) = match verdict {
            Ok(()) => (now_ms(), ""),
            Err(reason) if h.not_ready != reason => (0, reason),
            Err(_) => return Ok(false),
        };
        if !store.unreadable() {
            store.change(|s| {
                if let Some(h) = s.hire_in_mut(&seat.link_id, &seat.pane_id) {
                    h.ready_at_ms = ready_at_ms;
                    h.not_ready = not_ready.into();
                }
                Ok(())
            })?;
        }
        match verdict {
            Ok(()) => tracing::info!(hire = %h.hire_id, "mailbox.hire.ready"),
            Err(reason) => tracing::info!(hire = %h.hire_id, reason, "mailbox.hire.not_ready"),
        }
        Ok(verdict.is_ok())
    }

    /// Drops the Codex seat registrations of hires that ended.
    pub(crate) async fn forget_codex_seats(&self, ended: impl Fn(&str) -> bool) {
        if let Err(e) = self.inner.codex_seats.lock().await.forget(ended) {
            tracing::warn!(error = %e, "mailbox.hire.codex_registration_unsaved");
        }
    }

    /// Notes a fixed reason a live hire's seat was refused, until it is ready.
    pub(crate) async fn not_ready(&self, pane: (&str, &str), reason: &'static str) {
        let mut store = self.inner.store.lock().await;
        let noted = store
            .state
            .hire_in(pane.0, pane.1)
            .is_none_or(|h| h.ready_at_ms != 0 || h.not_ready == reason);
        if noted || store.unreadable() {
            return;
        }
        if let Err(e) = store.change(|s| {
            if let Some(h) = s.hire_in_mut(pane.0, pane.1) {
                h.not_ready = reason.into();
            }
            Ok(())
        }) {
            tracing::warn!(error = %e, "mailbox.hire.not_ready_unsaved");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hire(harness: &str) -> HireRec {
        serde_json::from_value(serde_json::json!({
            "hireId": "h1", "conversationId": "c", "projectId": "p", "role": "worker",
            "linkId": "l", "fleet": "f", "paneId": "%1", "workspace": "/w",
            "command": ["x"], "createdAtMs": 1, "harness": harness,
        }))
        .expect("hire")
    }

    fn settings(connected: bool, peers: bool) -> admission_pb::FleetSettings {
        admission_pb::FleetSettings {
            tools: if connected {
                FleetTools::Connected as i32
            } else {
                FleetTools::Off as i32
            },
            peer_messages: peers,
            ..Default::default()
        }
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_meta_tools_follow_the_switch_and_message_clankie_stands_apart() {
        let on = names(&["clankie_tools", "clankie_call", "message_clankie"]);
        let off = names(&["message_clankie"]);
        let h = hire("codex");
        assert_eq!(judge(&h, &on, &settings(true, false), &[]), Ok(()));
        assert_eq!(judge(&h, &off, &settings(false, false), &[]), Ok(()));
        for (tools, s) in [
            (&on, settings(false, false)),
            (&off, settings(true, false)),
            (
                &names(&["clankie_tools", "clankie_call"]),
                settings(true, false),
            ),
            (
                &names(&["clankie_call", "message_clankie"]),
                settings(true, false),
            ),
            (&on, settings(true, true)),
        ] {
            assert_eq!(
                judge(&h, tools, &s, &[]),
                Err("bridge_tools_mismatch"),
                "{tools:?}"
            );
        }
        let mut peers = on.clone();
        peers.extend(names(&["list_fleet_seats", "message_peer"]));
        assert_eq!(judge(&h, &peers, &settings(true, true), &[]), Ok(()));
        // A harness that polls for itself names none: only its seat counts.
        assert_eq!(judge(&hire("pi"), &[], &settings(true, true), &[]), Ok(()));
    }

    #[test]
    fn a_claude_needs_the_worker_plugins_channel() {
        let h = hire("claude");
        let tools = names(&["clankie_tools", "clankie_call", "message_clankie"]);
        let s = settings(true, false);
        let with = names(&["claude", "go", "--channels", CLAUDE_CHANNEL]);
        assert_eq!(judge(&h, &tools, &s, &with), Ok(()));
        for argv in [
            names(&["claude", "go"]),
            names(&["claude", "--channels", "server:clankie"]),
            names(&["claude", CLAUDE_CHANNEL]),
        ] {
            assert_eq!(
                judge(&h, &tools, &s, &argv),
                Err("channel_unavailable"),
                "{argv:?}"
            );
        }
    }
}
