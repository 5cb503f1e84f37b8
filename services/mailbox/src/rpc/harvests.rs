//! Completion harvests: when a hire's agent finishes, its lead hears one
//! `watch` report. Herdr says so (`agent_status: done`; once each time the
//! agent becomes done); under tmux a hired pane closes when its agent
//! exits, which also ends the hire as gone. A sweep observes the open hires
//! on a short clock, and the roster observes before it answers: both go
//! through [`MailboxService::observe`].
//!
//! Each harvest has the receipt `watch:<hire>:<n>` (the hire's n-th
//! completion). It is written in its lead's transcript once, whatever a
//! restart interrupts, and queued to the lead's seat when it is first
//! written. A host that did not answer knows nothing: unknown is never
//! done, and never gone.

use std::time::Duration;

use clankie_runtime::ClankieError;
use clankie_types::fleet::DeliveryKind;
use clankie_types::hire::HireEnd;
use clankie_types::transcript::{EntryKind, EntryRole};
use tokio_util::sync::CancellationToken;

use crate::panes::Listing;
use crate::rpc::conversations::present;
use crate::rpc::lead_seat::lead_seat;
use crate::store::{EntryRec, HEAD, HireRec, StateFile, now_ms};
use crate::{MailboxService, internal};

/// What one observation says about one open hire.
struct Seen {
    index: usize,
    /// Its pane closed.
    gone: bool,
    /// Its host says the agent is done (None: unknown).
    done: Option<bool>,
    /// This observation is a completion its lead has not heard of.
    finished: bool,
}

fn seen(index: usize, h: &HireRec, live: &Listing) -> Option<Seen> {
    if !h.is_open() {
        return None;
    }
    let gone = live.closed(&h.link_id, &h.pane_id, h.created_at_ms);
    let done = if gone {
        None
    } else {
        live.agent_done(&h.link_id, &h.pane_id)
    };
    let changed = gone || done.is_some_and(|d| d != h.agent_done);
    // A pane that closes after its agent was already heard done is not a
    // second completion.
    let finished = !h.agent_done && (gone || done == Some(true));
    changed.then_some(Seen {
        index,
        gone,
        done,
        finished,
    })
}

/// The watch report's words: which hire, and how it finished.
fn watch_text(state: &StateFile, h: &HireRec, gone: bool) -> String {
    let project = state
        .projects
        .iter()
        .find(|p| p.project_id == h.project_id)
        .map_or(h.project_id.as_str(), |p| p.name.as_str());
    let how = if gone {
        "ended: its pane closed (the agent exited)"
    } else {
        "finished: its agent is done"
    };
    format!(
        "[watch] hire {} ({} in project {project}, pane {}) {how}",
        h.hire_id, h.role, h.pane_id
    )
}

impl MailboxService {
    /// Applies one pane listing to the open hires: a closed pane ends its
    /// hire as gone, and each completion is harvested once.
    pub(crate) async fn observe(&self, live: &Listing) -> Result<(), ClankieError> {
        let mut store = self.inner.store.lock().await;
        if store.unreadable() {
            return Ok(());
        }
        let seen: Vec<Seen> = store
            .state
            .hires
            .iter()
            .enumerate()
            .filter_map(|(i, h)| seen(i, h, live))
            .collect();
        if seen.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        let mut heard = Vec::new();
        for s in seen.iter().filter(|s| s.finished) {
            let h = store.state.hires[s.index].clone();
            let receipt_id = format!("watch:{}:{}", h.hire_id, h.harvests + 1);
            if store.receipt(&receipt_id).is_some() {
                // Written before a restart cut the sweep short.
                continue;
            }
            let conversation = if present(&store.state, &h.conversation_id) {
                h.conversation_id.clone()
            } else if h.hand_started {
                // No one hired it and no one adopted it: no lead to tell.
                continue;
            } else {
                HEAD.to_string()
            };
            let text = watch_text(&store.state, &h, s.gone);
            let entry = EntryRec {
                seq: 0,
                kind: EntryKind::Watch,
                role: EntryRole::System,
                text: text.clone(),
                source: format!("hire:{}", h.hire_id),
                untrusted: false,
                at_ms: now,
                receipt_id: receipt_id.clone(),
                hire_id: h.hire_id.clone(),
            };
            store.append(&conversation, entry).map_err(internal)?;
            tracing::info!(hire = %h.hire_id, gone = s.gone, "mailbox.hire.harvested");
            if let Some(lead) = lead_seat(&store.state, &conversation) {
                heard.push((lead, receipt_id, text));
            }
        }
        store.change(|state| {
            for s in &seen {
                let h = &mut state.hires[s.index];
                if s.finished {
                    h.harvests += 1;
                }
                if let Some(done) = s.done {
                    h.agent_done = done;
                }
                if s.gone {
                    h.ended = Some(HireEnd::Gone);
                    h.agent_done = true;
                }
            }
            Ok(())
        })?;
        let ended: Vec<String> = seen
            .iter()
            .filter(|s| s.gone)
            .map(|s| store.state.hires[s.index].hire_id.clone())
            .collect();
        drop(store);
        self.inner.appended.send_modify(|n| *n += 1);
        for (lead, receipt_id, text) in heard {
            self.queue_to_lead(&lead, DeliveryKind::Watch, receipt_id, text, now)
                .await;
        }
        if !ended.is_empty() {
            self.forget_codex_seats(|h| ended.iter().any(|e| e == h))
                .await;
        }
        Ok(())
    }

    /// Observes the open hires, and retries owed retirements, every `every`
    /// until `shutdown`.
    pub(crate) async fn harvest(self, every: Duration, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Closed hires' tracker bookkeeping still owed is retried here.
            self.retry_retirements().await;
            let open = self
                .inner
                .store
                .lock()
                .await
                .state
                .hires
                .iter()
                .any(HireRec::is_open);
            if !open {
                continue;
            }
            let live = self.live_panes().await;
            if let Err(e) = self.observe(&live).await {
                tracing::warn!(reason = e.code.as_str(), "mailbox.harvest.failed");
            }
        }
    }
}
