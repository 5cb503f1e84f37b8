//! The auto-scheduler service.
//!
//! Owns: the master switch and the owner's saved global autonomy level with
//! the scheduled self-wakes (`captain/autonomy.json`), the Auto rounds and
//! their restart-stable cadence (`auto-rounds/`), and the projects status
//! line. Does not own projects, conversations or hires (the mailbox does):
//! it reads them each round, and a wake is an ordinary mailbox message of
//! kind `wake`, idempotent by its wake id.
//!
//! A round, at each deadline while the switch is on:
//! 1. The next deadline is reserved and saved before any other work; a late
//!    start coalesces the missed intervals into this one round.
//! 2. Each lead with Auto projects is admitted afresh: the switch re-read,
//!    its projects re-read and re-routed, its evidence recomputed (projects,
//!    focus, tracker references, live workers, each workspace's HEAD).
//! 3. Unchanged evidence accepted less than the idle window ago is
//!    suppressed. Otherwise a delivery reservation (fingerprint, wake id) is
//!    saved, then the wake is sent, then its acceptance is saved.
//! 4. At startup a reservation still pending is reconciled: the mailbox
//!    knows the wake id → accepted; unknown → fenced as if accepted at its
//!    reservation, so it is never sent twice and rewakes only after the idle
//!    window or on new evidence.

pub mod files;
pub mod round;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clankie_proto::auto::v1 as pb;
use clankie_proto::mailbox::v1 as mpb;
use clankie_proto::tracker::v1 as tpb;
use clankie_runtime::grpc::{self, Client, Meta};
use clankie_runtime::owner::{self, OwnerCheck};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use tokio::sync::{Mutex, Notify};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::files::{Autonomy, Cadence, JournalLine, SelfWake};
use clankie_runtime::refuse::auto as refuse;

/// The fleet-round cadence: 30 minutes.
pub const ROUND_MS: u64 = 30 * 60 * 1000;
/// How far ahead a self-wake may be scheduled: 30 days.
pub const MAX_SELF_WAKE_AHEAD_MS: i64 = 30 * 24 * 3600 * 1000;
/// Self-wakes held per conversation.
pub const MAX_SELF_WAKES: usize = 16;

/// Test hooks: when `auto-rounds/crash-once-STEP` exists the scheduler
/// removes it and aborts at that step, as `kill -9` would.
pub const CRASH_STEPS: &[&str] = &["reserved-deadline", "reserved-delivery", "sent-wake"];

struct Inner {
    root: PathBuf,
    owner: OwnerCheck,
    mailbox: mpb::mailbox_client::MailboxClient<Client>,
    tracker: tpb::tracker_client::TrackerClient<Client>,
    tick: Duration,
    idle: Duration,
    /// `Err`: the cadence file cannot be read; no Auto checks run.
    cadence: Mutex<Result<Cadence, String>>,
    last_round: parking_lot::Mutex<pb::RoundStats>,
    rounds: std::sync::atomic::AtomicU64,
    /// Serializes writes of autonomy.json.
    autonomy_lock: Mutex<()>,
    /// One round at a time (the scheduled one or a requested one).
    round_lock: Mutex<()>,
    /// Woken when the switch or a self-wake changes.
    changed: Notify,
    _lock: files::CadenceLock,
}

/// The auto-scheduler; cheap to clone.
#[derive(Clone)]
pub struct AutoService {
    inner: Arc<Inner>,
}

fn internal(e: impl std::fmt::Display) -> ClankieError {
    ErrorCode::Internal.err(format!("the auto-scheduler could not save its state: {e}"))
}

/// Aborts at a test crash point when its marker exists.
fn crash_point(root: &std::path::Path, step: &str) {
    let marker = files::rounds_dir(root).join(format!("crash-once-{step}"));
    if marker.exists() && std::fs::remove_file(&marker).is_ok() {
        let _ = clankie_runtime::state::sync_dir(&files::rounds_dir(root));
        tracing::warn!(step, "auto.crash_point");
        std::process::abort();
    }
}

/// This process's CPU time (user + system), in microseconds.
fn cpu_us() -> u64 {
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

fn autonomy_pb(a: &Autonomy, conversation: Option<&str>) -> pb::Autonomy {
    pb::Autonomy {
        on: a.on(),
        level: a.file.level.clone(),
        readable: a.problem.is_none(),
        problem: a.problem.clone().unwrap_or_default(),
        scheduled: a
            .file
            .scheduled
            .iter()
            .filter(|w| conversation.is_none_or(|c| w.conversation_id == c))
            .map(|w| pb::ScheduledWake {
                wake_id: w.wake_id.clone(),
                conversation_id: w.conversation_id.clone(),
                at_ms: w.at_ms,
                note: w.note.clone(),
            })
            .collect(),
    }
}

/// How to build the auto-scheduler.
pub struct Options {
    pub paths: StatePaths,
    /// The round interval.
    pub tick: Duration,
    /// How long unchanged evidence waits before it rewakes a lead.
    pub idle: Duration,
}

impl Options {
    pub fn new(paths: StatePaths) -> Self {
        let tick = Duration::from_millis(ROUND_MS);
        Options {
            paths,
            tick,
            idle: tick * 4,
        }
    }

    /// Opens the scheduler and starts its rounds, which stop at `shutdown`.
    pub async fn build(self, shutdown: CancellationToken) -> anyhow::Result<Running> {
        let service = AutoService::open(self.paths, self.tick, self.idle)?;
        let scheduler = tokio::spawn(service.clone().run(shutdown));
        tracing::info!(tick_ms = self.tick.as_millis() as u64, "auto scheduling");
        Ok(Running { service, scheduler })
    }
}

/// The scheduler serving, with its rounds running.
pub struct Running {
    service: AutoService,
    scheduler: tokio::task::JoinHandle<()>,
}

impl clankie_runtime::main_kit::Served for Running {
    fn routes(&self) -> tonic::service::Routes {
        self.service.routes()
    }

    fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        self.service.readiness()
    }

    async fn close(self) {
        let _ = self.scheduler.await;
    }
}

impl AutoService {
    /// Takes the cadence lock and loads the state. A second scheduler on
    /// the same state folder fails here.
    fn open(paths: StatePaths, tick: Duration, idle: Duration) -> anyhow::Result<Self> {
        let root = paths.root().to_path_buf();
        let lock = files::lock_cadence(&root)?;
        let token = owner::read_owner_token(&paths.owner_credential())?;
        let owner = OwnerCheck::from_token(&token);
        let mailbox = clankie_runtime::clients::mailbox(&paths, Meta::owner(&token));
        let tracker = clankie_runtime::clients::tracker(&paths, Meta::owner(&token));
        let cadence = files::load_cadence(&root, now_ms(), tick.as_millis() as i64);
        if let Err(problem) = &cadence {
            tracing::error!(%problem, "auto.cadence_unreadable");
        }
        Ok(AutoService {
            inner: Arc::new(Inner {
                root,
                owner,
                mailbox,
                tracker,
                tick,
                idle,
                cadence: Mutex::new(cadence),
                last_round: parking_lot::Mutex::new(pb::RoundStats::default()),
                rounds: std::sync::atomic::AtomicU64::new(0),
                autonomy_lock: Mutex::new(()),
                round_lock: Mutex::new(()),
                changed: Notify::new(),
                _lock: lock,
            }),
        })
    }

    /// The tonic routes for this service.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(pb::auto_server::AutoServer::new(self.clone()))
    }

    /// Ready while the cadence and the master switch are readable.
    pub fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        let inner = self.inner.clone();
        clankie_runtime::readiness::Readiness::check(move || {
            if let Ok(c) = inner.cadence.try_lock()
                && let Err(p) = &*c
            {
                return Some(format!("round cadence unreadable: {p}"));
            }
            files::read_autonomy(&inner.root)
                .problem
                .map(|p| format!("master switch unreadable: {p}"))
        })
    }

    fn tick_ms(&self) -> i64 {
        self.inner.tick.as_millis() as i64
    }

    fn idle_ms(&self) -> i64 {
        self.inner.idle.as_millis() as i64
    }

    fn journal(&self, line: JournalLine) {
        if let Err(e) = files::journal(&self.inner.root, &line) {
            tracing::error!(error = %e, "auto.journal_failed");
        }
    }

    /// Settles reservations left pending by a crash.
    async fn reconcile(&self) {
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
                    let mut req = Request::new(mpb::WakeReceiptRequest {
                        wake_id: p.wake_id.clone(),
                    });
                    req.set_timeout(Duration::from_secs(5));
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
    async fn round(&self, deadline: i64) {
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
        let mut stats = pb::RoundStats {
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
    async fn leads_now(&self) -> Result<round::View, ClankieError> {
        let mut mailbox = self.inner.mailbox.clone();
        let timeout = Duration::from_secs(10);
        let mut r = Request::new(mpb::ListProjectsRequest {});
        r.set_timeout(timeout);
        let projects = mailbox
            .list_projects(r)
            .await
            .map_err(|s| ClankieError::from_status(&s))?
            .into_inner()
            .projects;
        let mut r = Request::new(mpb::ListConversationsRequest {});
        r.set_timeout(timeout);
        let conversations = mailbox
            .list_conversations(r)
            .await
            .map_err(|s| ClankieError::from_status(&s))?
            .into_inner()
            .conversations;
        let mut r = Request::new(mpb::RosterRequest {});
        r.set_timeout(timeout);
        let hires = mailbox
            .roster(r)
            .await
            .map_err(|s| ClankieError::from_status(&s))?
            .into_inner()
            .hires;
        Ok(round::View::new(projects, conversations, hires))
    }

    /// Admits and wakes one lead: `Some(accepted_at)` when woken, `None`
    /// when its evidence is unchanged within the idle window.
    async fn wake_lead(&self, round_id: &str, lead: &str) -> Result<Option<i64>, ClankieError> {
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
        let mut req = Request::new(mpb::WakeRequest {
            conversation_id: lead.to_string(),
            wake_id: wake_id.clone(),
            text: evidence.text(round_id),
            source: "auto".into(),
        });
        req.set_timeout(Duration::from_secs(10));
        let sent = self.inner.mailbox.clone().wake(req).await;
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
            Err(s) if s.metadata().contains_key(clankie_runtime::code::REASON_KEY) => {
                // Refused: nothing was accepted; the reservation is dropped.
                let mut guard = self.inner.cadence.lock().await;
                if let Ok(c) = guard.as_mut() {
                    if let Some(f) = c.leads.get_mut(lead) {
                        f.pending = None;
                    }
                    files::save_cadence(&self.inner.root, c).map_err(internal)?;
                }
                Err(ClankieError::from_status(&s))
            }
            // Unknown: the reservation stays and is reconciled at startup or
            // settled by the next round's repeat of the same wake id.
            Err(s) => Err(ClankieError::from_status(&s)),
        }
    }

    /// Sends every due self-wake while the switch is on.
    async fn fire_self_wakes(&self) {
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
            let mut req = Request::new(mpb::WakeRequest {
                conversation_id: w.conversation_id.clone(),
                wake_id: w.wake_id.clone(),
                text: if w.note.is_empty() {
                    "Self-wake: the time you scheduled has come.".into()
                } else {
                    format!("Self-wake: {}", w.note)
                },
                source: "self".into(),
            });
            req.set_timeout(Duration::from_secs(10));
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
    async fn lead_of<T>(&self, req: &Request<T>) -> Result<String, ClankieError> {
        let ticket = grpc::ticket(req.metadata()).ok_or_else(|| {
            ErrorCode::FleetCredentialRequired.err("the request carries no admission ticket")
        })?;
        let mut call = Request::new(mpb::ResolveCallerRequest {
            repo: String::new(),
        });
        call.set_timeout(Duration::from_secs(5));
        grpc::set_ticket(&mut call, ticket);
        let info = self
            .inner
            .mailbox
            .clone()
            .resolve_caller(call)
            .await
            .map_err(|s| ClankieError::from_status(&s))?
            .into_inner();
        if info.role != "lead" || info.conversation_id.is_empty() {
            return Err(ErrorCode::RoleNotAllowed
                .err(format!(
                    "get_wake and schedule_wake are the lead's; this seat is a {}",
                    info.role
                ))
                .with_details(serde_json::json!({ "role": info.role })));
        }
        Ok(info.conversation_id)
    }

    /// Open asks in the tracker's inbox, with their issue identifiers.
    async fn open_asks(&self) -> Vec<String> {
        let mut req = Request::new(tpb::InvokeRequest {
            tool: "list_inbox".into(),
            arguments_json: r#"{"limit":250}"#.into(),
            actor: "auto".into(),
            role: "owner".into(),
            scope_team: String::new(),
        });
        req.set_timeout(Duration::from_secs(5));
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

#[tonic::async_trait]
impl pb::auto_server::Auto for AutoService {
    async fn get_switch(
        &self,
        request: Request<pb::GetSwitchRequest>,
    ) -> Result<Response<pb::Autonomy>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        Ok(Response::new(autonomy_pb(
            &files::read_autonomy(&self.inner.root),
            None,
        )))
    }

    async fn set_switch(
        &self,
        request: Request<pb::SetSwitchRequest>,
    ) -> Result<Response<pb::Autonomy>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let req = request.into_inner();
        if let Some(level) = &req.level
            && !matches!(level.as_str(), "off" | "propose" | "full")
        {
            return Err(refuse(
                ErrorCode::InvalidArgument
                    .err(format!("level {level}: choose off, propose or full")),
            ));
        }
        let _g = self.inner.autonomy_lock.lock().await;
        let mut a = files::read_autonomy(&self.inner.root);
        if let Some(problem) = &a.problem {
            return Err(refuse(ErrorCode::AutoStateUnreadable.err(format!(
                "captain/autonomy.json cannot be read ({problem}); it reads as off. Repair or move it aside first"
            ))));
        }
        if let Some(on) = req.on {
            a.file.on = on;
        }
        if let Some(level) = req.level {
            a.file.level = level;
        }
        files::save_autonomy(&self.inner.root, &a.file).map_err(|e| refuse(internal(e)))?;
        tracing::info!(on = a.file.on, level = %a.file.level, "auto.switch");
        self.inner.changed.notify_one();
        Ok(Response::new(autonomy_pb(&a, None)))
    }

    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::AutoStatus>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let cadence = self.inner.cadence.lock().await.clone();
        let (next, problem, leads) = match cadence {
            Ok(c) => (
                c.next_deadline_ms,
                String::new(),
                c.leads
                    .iter()
                    .map(|(id, f)| pb::LeadCadence {
                        conversation_id: id.clone(),
                        accepted_fingerprint: f.accepted_fingerprint.clone(),
                        accepted_at_ms: f.accepted_at_ms,
                        pending_fingerprint: f
                            .pending
                            .as_ref()
                            .map(|p| p.fingerprint.clone())
                            .unwrap_or_default(),
                        pending_wake_id: f
                            .pending
                            .as_ref()
                            .map(|p| p.wake_id.clone())
                            .unwrap_or_default(),
                        pending_at_ms: f.pending.as_ref().map_or(0, |p| p.reserved_at_ms),
                    })
                    .collect(),
            ),
            Err(p) => (0, p, Vec::new()),
        };
        Ok(Response::new(pb::AutoStatus {
            autonomy: Some(autonomy_pb(&files::read_autonomy(&self.inner.root), None)),
            next_deadline_ms: next,
            cadence_problem: problem,
            leads,
            last_round: Some(self.inner.last_round.lock().clone()),
            tick_ms: self.inner.tick.as_millis() as u64,
            idle_ms: self.inner.idle.as_millis() as u64,
            rounds: self.inner.rounds.load(std::sync::atomic::Ordering::Relaxed),
        }))
    }

    async fn run_round(
        &self,
        request: Request<pb::RunRoundRequest>,
    ) -> Result<Response<pb::RoundStats>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        if let Err(p) = self.inner.cadence.lock().await.as_ref() {
            return Err(refuse(ErrorCode::AutoStateUnreadable.err(p.clone())));
        }
        let _one = self.inner.round_lock.lock().await;
        self.round(now_ms()).await;
        let stats = self.inner.last_round.lock().clone();
        Ok(Response::new(stats))
    }

    async fn project_status(
        &self,
        request: Request<pb::ProjectStatusRequest>,
    ) -> Result<Response<pb::ProjectStatusResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let view = self.leads_now().await.map_err(refuse)?;
        let asks = self.open_asks().await;
        let mut lines = Vec::new();
        for p in &view.projects {
            let landed = {
                let mut n = 0;
                for w in &p.workspaces {
                    n += round::landed_since_midnight(std::path::Path::new(&w.path)).await;
                }
                n
            };
            lines.push(pb::ProjectStatusLine {
                project_id: p.project_id.clone(),
                name: p.name.clone(),
                auto: p.auto,
                focus: p.focus.clone(),
                agents_working: view.live_workers(p).len() as u32,
                landed_today: landed,
                needs_you: asks
                    .iter()
                    .filter(|i| round::team_of(i) == Some(p.tracker_team.as_str()))
                    .filter(|_| !p.tracker_team.is_empty())
                    .count() as u32,
                lead_conversation_id: view.lead_of(p).conversation_id,
            });
        }
        Ok(Response::new(pb::ProjectStatusResponse {
            projects: lines,
            needs_you_total: asks.len() as u32,
        }))
    }

    async fn get_wake(
        &self,
        request: Request<pb::GetWakeRequest>,
    ) -> Result<Response<pb::WakeState>, Status> {
        let lead = self.lead_of(&request).await.map_err(refuse)?;
        let a = files::read_autonomy(&self.inner.root);
        let cadence = self.inner.cadence.lock().await.clone();
        let (next, last) = match &cadence {
            Ok(c) => (
                c.next_deadline_ms,
                c.leads.get(&lead).map_or(0, |f| f.accepted_at_ms),
            ),
            Err(_) => (0, 0),
        };
        Ok(Response::new(pb::WakeState {
            switch_on: a.on(),
            scheduled: autonomy_pb(&a, Some(&lead)).scheduled,
            conversation_id: lead,
            next_round_ms: if a.on() { next } else { 0 },
            last_wake_at_ms: last,
        }))
    }

    async fn schedule_wake(
        &self,
        request: Request<pb::ScheduleWakeRequest>,
    ) -> Result<Response<pb::ScheduledWake>, Status> {
        let lead = self.lead_of(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        let now = now_ms();
        if req.at_ms <= now || req.at_ms > now + MAX_SELF_WAKE_AHEAD_MS {
            return Err(refuse(ErrorCode::InvalidArgument.err(
                "a self-wake is at a time in the future, at most 30 days ahead (atMs, ms since the epoch)",
            )));
        }
        if req.note.len() > 2048 {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("a self-wake note is at most 2 KiB"),
            ));
        }
        let _g = self.inner.autonomy_lock.lock().await;
        let mut a = files::read_autonomy(&self.inner.root);
        if let Some(problem) = &a.problem {
            return Err(refuse(ErrorCode::AutoStateUnreadable.err(format!(
                "captain/autonomy.json cannot be read ({problem}); the switch reads as off"
            ))));
        }
        if !a.on() {
            return Err(refuse(ErrorCode::ProposeOnly.err(
                "the autonomy switch is off: scheduled self-wakes are stopped",
            )));
        }
        if a.file
            .scheduled
            .iter()
            .filter(|w| w.conversation_id == lead)
            .count()
            >= MAX_SELF_WAKES
        {
            return Err(refuse(ErrorCode::InvalidArgument.err(format!(
                "this lead already holds {MAX_SELF_WAKES} self-wakes"
            ))));
        }
        let wake = SelfWake {
            wake_id: format!("self_{}", uuid::Uuid::new_v4().simple()),
            conversation_id: lead,
            at_ms: req.at_ms,
            note: req.note,
        };
        a.file.scheduled.push(wake.clone());
        files::save_autonomy(&self.inner.root, &a.file).map_err(|e| refuse(internal(e)))?;
        self.inner.changed.notify_one();
        Ok(Response::new(pb::ScheduledWake {
            wake_id: wake.wake_id,
            conversation_id: wake.conversation_id,
            at_ms: wake.at_ms,
            note: wake.note,
        }))
    }
}
