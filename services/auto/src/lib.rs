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
mod grpc;
mod metrics;
pub mod round;
mod scheduler;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clankie_proto::auto::v1 as auto_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::grpc::{Client, Meta};
use clankie_runtime::owner::{self, OwnerCheck};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::refuse::auto as refuse;
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use clankie_types::autonomy::AutonomyLevel;
use tokio::sync::{Mutex, Notify};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::files::{Autonomy, Cadence, JournalLine, SelfWake};

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
    mailbox: mailbox_pb::mailbox_client::MailboxClient<Client>,
    tracker: tracker_pb::tracker_client::TrackerClient<Client>,
    tick: Duration,
    idle: Duration,
    /// `Err`: the cadence file cannot be read; no Auto checks run.
    cadence: Mutex<Result<Cadence, String>>,
    last_round: parking_lot::Mutex<auto_pb::RoundStats>,
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
                last_round: parking_lot::Mutex::new(auto_pb::RoundStats::default()),
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
        tonic::service::Routes::new(auto_pb::auto_server::AutoServer::new(self.clone()))
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
}
