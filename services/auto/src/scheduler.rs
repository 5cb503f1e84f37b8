//! The scheduler's life: reconciling the journal at start, the round loop,
//! one round (which leads to wake, with idle suppression and the fence in the
//! cadence file), the wake itself, and the leads' scheduled self-wakes.

use super::*;
use clankie_runtime::clients::{Answer as _, Unanswered};
use clankie_runtime::clients::{Call, INTERNAL};
use clankie_types::transcript::WakeSource;

/// Aborts at a test crash point when its marker exists.
pub(super) fn crash_point(root: &std::path::Path, step: &str) {
    clankie_runtime::instance::crash_once(&files::rounds_dir(root), step);
}

/// This process's CPU time (user + system), in microseconds.
pub(super) fn cpu_us() -> u64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| {
                (tv.tv_sec() as u64) * 1_000_000 + tv.tv_usec() as u64
            };
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0)
}

impl AutoService {
    pub(super) fn tick_ms(&self) -> i64 {
        self.inner.tick.as_millis() as i64
    }

    pub(super) fn idle_ms(&self) -> i64 {
        self.inner.idle.as_millis() as i64
    }

    pub(super) fn journal(&self, line: JournalLine) {
        if let Err(e) = files::journal(&self.inner.root, &line) {
            tracing::error!(error = %e, "auto.journal_failed");
        }
    }

    /// Settles reservations left pending by a crash.
    pub(super) async fn reconcile(&self) {
        let mut guard = self.inner.cadence.lock().await;
        let Ok(cadence) = guard.as_mut() else {
            return;
        };
        let journal = files::read_journal(&self.inner.root);
        let mut changed = false;
        for (lead, fence) in cadence.leads.iter_mut() {
            let Some(p) = fence.pending.clone() else {
                continue;
            };
            let in_journal = journal
                .iter()
                .find(|l| l.event == "accepted" && l.wake_id == p.wake_id)
                .map(|l| l.at_ms);
            let in_mailbox = match in_journal {
                Some(_) => None,
                None => {
                    let req = Call::new(mailbox_pb::WakeReceiptRequest {
                        wake_id: p.wake_id.clone(),
                    })
                    .timeout(INTERNAL)
                    .request();
                    self.inner
                        .mailbox
                        .clone()
                        .wake_receipt(req)
                        .await
                        .ok()
                        .map(|r| r.into_inner().found)
                }
            };
            // Known: accepted. Unknown (not found, or the mailbox cannot
            // say): fenced as accepted at the reservation, never resent.
            let at = in_journal.unwrap_or(p.reserved_at_ms);
            tracing::info!(
                lead = %lead,
                known = in_journal.is_some() || in_mailbox == Some(true),
                "auto.reconciled"
            );
            fence.accepted_fingerprint = p.fingerprint.clone();
            fence.accepted_at_ms = at;
            fence.pending = None;
            changed = true;
        }
        if changed && let Err(e) = files::save_cadence(&self.inner.root, cadence) {
            tracing::error!(error = %e, "auto.cadence_save_failed");
            *guard = Err(format!("saving the reconciled cadence failed: {e}"));
        }
    }

    /// The scheduler loop, until shutdown.
    pub async fn run(self, shutdown: CancellationToken) {
        self.reconcile().await;
        loop {
            let now = now_ms();
            let deadline = {
                let mut guard = self.inner.cadence.lock().await;
                if guard.is_err() {
                    // Try the file again: the owner may have repaired it.
                    *guard = files::load_cadence(&self.inner.root, now, self.tick_ms());
                }
                guard.as_ref().ok().map(|c| c.next_deadline_ms)
            };
            let autonomy = files::read_autonomy(&self.inner.root);
            let next_self = autonomy
                .file
                .scheduled
                .iter()
                .map(|w| w.at_ms)
                .min()
                .filter(|_| autonomy.on());
            let wake_at = [deadline, next_self]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + self.tick_ms());
            let sleep = Duration::from_millis((wake_at - now).clamp(0, self.tick_ms()) as u64);
            if wake_at > now {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(sleep) => {}
                    _ = self.inner.changed.notified() => {}
                }
                continue;
            }
            if shutdown.is_cancelled() {
                return;
            }
            if let Some(d) = deadline
                && d <= now
            {
                let _one = self.inner.round_lock.lock().await;
                self.round(d).await;
            }
            self.fire_self_wakes().await;
        }
    }

    /// One round for the deadline `deadline`.
    pub(super) async fn round(&self, deadline: i64) {
        let started = now_ms();
        let cpu0 = cpu_us();
        let round_id = format!("round_{deadline}");
        // Reserve the next interval before any asynchronous work: a late
        // start checks once, and missed intervals coalesce into it.
        {
            let mut guard = self.inner.cadence.lock().await;
            let Ok(c) = guard.as_mut() else {
                return;
            };
            c.next_deadline_ms = if started - deadline >= self.tick_ms() {
                started + self.tick_ms()
            } else {
                deadline + self.tick_ms()
            };
            if let Err(e) = files::save_cadence(&self.inner.root, c) {
                tracing::error!(error = %e, "auto.cadence_save_failed");
                *guard = Err(format!("saving the next deadline failed: {e}"));
                return;
            }
        }
        self.journal(JournalLine {
            event: "round".into(),
            round_id: round_id.clone(),
            deadline_ms: deadline,
            at_ms: started,
            ..Default::default()
        });
        crash_point(&self.inner.root, "reserved-deadline");
        let mut stats = auto_pb::RoundStats {
            round_id: round_id.clone(),
            deadline_ms: deadline,
            started_ms: started,
            ..Default::default()
        };
        if !files::read_autonomy(&self.inner.root).on() {
            stats.skipped = "the switch is off".into();
        } else {
            match self.leads_now().await {
                Err(e) => stats.skipped = format!("projects cannot be read: {}", e.message),
                Ok(view) => {
                    stats.projects = view.auto_projects() as u32;
                    let leads = view.leads();
                    stats.leads = leads.len() as u32;
                    if leads.is_empty() {
                        stats.skipped = "no project is on Auto".into();
                    }
                    for lead in leads {
                        match self.wake_lead(&round_id, &lead).await {
                            Ok(Some(at)) => {
                                stats.woken += 1;
                                stats.last_accepted_ms = stats.last_accepted_ms.max(at);
                            }
                            Ok(None) => stats.suppressed += 1,
                            Err(e) => {
                                tracing::warn!(reason = e.code.as_str(), lead = %lead, "auto.wake_failed");
                            }
                        }
                    }
                }
            }
        }
        stats.finished_ms = now_ms();
        stats.cpu_us = cpu_us().saturating_sub(cpu0);
        crate::metrics::round(stats.woken, !stats.skipped.is_empty());
        self.journal(JournalLine {
            event: "finished".into(),
            round_id,
            deadline_ms: deadline,
            at_ms: stats.finished_ms,
            ..Default::default()
        });
        tracing::info!(
            woken = stats.woken,
            suppressed = stats.suppressed,
            leads = stats.leads,
            skipped = %stats.skipped,
            "auto.round"
        );
        self.inner
            .rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.inner.last_round.lock() = stats;
    }

    /// Projects, conversations and hires, read now.
    pub(super) async fn leads_now(&self) -> Result<round::View, ClankieError> {
        let mut mailbox = self.inner.mailbox.clone();
        let timeout = Duration::from_secs(10);
        let r = Call::new(mailbox_pb::ListProjectsRequest {})
            .timeout(timeout)
            .request();
        let projects = mailbox.list_projects(r).await.answer()?.projects;
        let r = Call::new(mailbox_pb::ListConversationsRequest {})
            .timeout(timeout)
            .request();
        let conversations = mailbox.list_conversations(r).await.answer()?.conversations;
        let r = Call::new(mailbox_pb::RosterRequest {})
            .timeout(timeout)
            .request();
        let hires = mailbox.roster(r).await.answer()?.hires;
        Ok(round::View::new(projects, conversations, hires))
    }

    /// Admits and wakes one lead: `Some(accepted_at)` when woken, `None`
    /// when its evidence is unchanged within the idle window.
    pub(super) async fn wake_lead(
        &self,
        round_id: &str,
        lead: &str,
    ) -> Result<Option<i64>, ClankieError> {
        // Admission rechecks the switch, the membership and the evidence.
        if !files::read_autonomy(&self.inner.root).on() {
            return Ok(None);
        }
        let view = self.leads_now().await?;
        let evidence = view.evidence(lead);
        if evidence.projects.is_empty() {
            return Ok(None);
        }
        let fingerprint = evidence.fingerprint();
        let now = now_ms();
        let wake_id = format!("wake_{round_id}_{lead}");
        {
            let mut guard = self.inner.cadence.lock().await;
            let c = guard
                .as_mut()
                .map_err(|p| ErrorCode::AutoStateUnreadable.err(p.clone()))?;
            let fence = c.leads.entry(lead.to_string()).or_default();
            // A reservation whose answer was lost stays fenced: it counts
            // as accepted when reserved, and is never sent again.
            if let Some(p) = fence.pending.take() {
                fence.accepted_fingerprint = p.fingerprint;
                fence.accepted_at_ms = p.reserved_at_ms;
            }
            if fence.accepted_fingerprint == fingerprint
                && now - fence.accepted_at_ms < self.idle_ms()
            {
                self.journal(JournalLine {
                    event: "suppressed".into(),
                    round_id: round_id.into(),
                    at_ms: now,
                    lead: lead.into(),
                    fingerprint,
                    ..Default::default()
                });
                return Ok(None);
            }
            // The reservation is durable before the wake is prepared.
            fence.pending = Some(files::Pending {
                fingerprint: fingerprint.clone(),
                wake_id: wake_id.clone(),
                reserved_at_ms: now,
            });
            files::save_cadence(&self.inner.root, c).map_err(internal)?;
        }
        crash_point(&self.inner.root, "reserved-delivery");
        let req = Call::new(mailbox_pb::WakeRequest {
            conversation_id: lead.to_string(),
            wake_id: wake_id.clone(),
            text: evidence.text(round_id),
            source: WakeSource::Auto.wire(),
        })
        .timeout(Duration::from_secs(10))
        .request();
        let sent = self.inner.mailbox.clone().wake(req).await.verdict();
        let accepted_at = now_ms();
        match sent {
            Ok(_) => {
                crash_point(&self.inner.root, "sent-wake");
                self.journal(JournalLine {
                    event: "accepted".into(),
                    round_id: round_id.into(),
                    at_ms: accepted_at,
                    lead: lead.into(),
                    wake_id: wake_id.clone(),
                    fingerprint: fingerprint.clone(),
                    ..Default::default()
                });
                let mut guard = self.inner.cadence.lock().await;
                if let Ok(c) = guard.as_mut() {
                    let fence = c.leads.entry(lead.to_string()).or_default();
                    fence.accepted_fingerprint = fingerprint;
                    fence.accepted_at_ms = accepted_at;
                    fence.pending = None;
                    files::save_cadence(&self.inner.root, c).map_err(internal)?;
                }
                Ok(Some(accepted_at))
            }
            Err(Unanswered::Verdict(e)) => {
                // Refused: nothing was accepted; the reservation is dropped.
                let mut guard = self.inner.cadence.lock().await;
                if let Ok(c) = guard.as_mut() {
                    if let Some(f) = c.leads.get_mut(lead) {
                        f.pending = None;
                    }
                    files::save_cadence(&self.inner.root, c).map_err(internal)?;
                }
                Err(e)
            }
            // Unknown: the reservation stays and is reconciled at startup or
            // settled by the next round's repeat of the same wake id.
            Err(lost) => Err(lost.into_error()),
        }
    }

    /// Sends every due self-wake while the switch is on.
    pub(super) async fn fire_self_wakes(&self) {
        let autonomy = files::read_autonomy(&self.inner.root);
        if !autonomy.on() {
            return;
        }
        let now = now_ms();
        let due: Vec<SelfWake> = autonomy
            .file
            .scheduled
            .iter()
            .filter(|w| w.at_ms <= now)
            .cloned()
            .collect();
        for w in due {
            let req = Call::new(mailbox_pb::WakeRequest {
                conversation_id: w.conversation_id.clone(),
                wake_id: w.wake_id.clone(),
                text: if w.note.is_empty() {
                    "Self-wake: the time you scheduled has come.".into()
                } else {
                    format!("Self-wake: {}", w.note)
                },
                source: WakeSource::SelfWake.wire(),
            })
            .timeout(Duration::from_secs(10))
            .request();
            // The wake id makes a resend after a crash a replay.
            if self.inner.mailbox.clone().wake(req).await.is_err() {
                continue;
            }
            self.journal(JournalLine {
                event: "self-wake".into(),
                at_ms: now_ms(),
                lead: w.conversation_id.clone(),
                wake_id: w.wake_id.clone(),
                ..Default::default()
            });
            let _g = self.inner.autonomy_lock.lock().await;
            let mut a = files::read_autonomy(&self.inner.root);
            if a.problem.is_none() {
                a.file.scheduled.retain(|s| s.wake_id != w.wake_id);
                if let Err(e) = files::save_autonomy(&self.inner.root, &a.file) {
                    tracing::error!(error = %e, "auto.autonomy_save_failed");
                }
            }
        }
    }

    /// The lead conversation behind a fleet request's ticket.
    pub(super) async fn lead_of<T>(&self, req: &Request<T>) -> Result<String, ClankieError> {
        let ticket = clankie_runtime::grpc::ticket(req.metadata()).ok_or_else(|| {
            ErrorCode::FleetCredentialRequired.err("the request carries no admission ticket")
        })?;
        let call = Call::new(mailbox_pb::ResolveCallerRequest {
            repo: String::new(),
        })
        .timeout(INTERNAL)
        .ticket(ticket)
        .request();
        let info = self
            .inner
            .mailbox
            .clone()
            .resolve_caller(call)
            .await
            .answer()?;
        let role = clankie_types::Role::from_wire(info.role);
        if role != Some(clankie_types::Role::Lead) || info.conversation_id.is_empty() {
            let word = role.map_or("worker", clankie_types::Role::as_str);
            return Err(ErrorCode::RoleNotAllowed
                .err(format!(
                    "get_wake and schedule_wake are the lead's; this seat is a {word}"
                ))
                .with_details(serde_json::json!({ "role": word })));
        }
        Ok(info.conversation_id)
    }

    /// Open asks in the tracker's inbox, with their issue identifiers.
    pub(super) async fn open_asks(&self) -> Vec<String> {
        let req = Call::new(tracker_pb::InvokeRequest {
            tool: "list_inbox".into(),
            arguments_json: r#"{"limit":250}"#.into(),
            actor: "auto".into(),
            role: clankie_types::Role::Owner.wire(),
            scope_team: String::new(),
            linear_route: None,
        })
        .timeout(INTERNAL)
        .request();
        let Ok(r) = self.inner.tracker.clone().invoke(req).await else {
            return Vec::new();
        };
        let v: serde_json::Value =
            serde_json::from_str(&r.into_inner().result_json).unwrap_or_default();
        v["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter(|i| i["kind"] == "ask" && i["resolved"] != true)
                    .map(|i| i["identifier"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}
