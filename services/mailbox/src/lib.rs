//! The mailbox service.
//!
//! Owns: projects (with a revision fencing every edit), conversations (the
//! global head and lead chats) and their transcripts, hires (a pane opened
//! in a linked tmux session for a project, owned by the conversation that
//! hired it), the roster, worker reports (`message_clankie`) delivered to
//! the hiring lead as untrusted agent output with receipts that never
//! reroute or replay an accepted report, seats with their deliveries and
//! peer messages, wakes from the auto-scheduler, and landing review.
//!
//! Does not own: admission (a caller's pane comes from the admission ticket
//! it carries, rechecked here), pane membership reads, or any tool.
//!
//! Where things are:
//! - this file: [`MailboxService`], its shared state, [`Options`], readiness;
//! - `grpc.rs`: the gRPC trait, one delegation per RPC in proto order;
//! - `rpc/`: the handlers by domain (projects, conversations, hires,
//!   callers, reports, seats, reviews, wakes);
//! - [`state`]: the pure books ([`store`], [`seats`], [`reviews`],
//!   [`codex_seats`]);
//! - `convert.rs`: records to protobuf; `panes.rs`: the pane actions on a
//!   linked tmux or Herdr session (open, close, list).

mod convert;
mod grpc;
mod metrics;
mod panes;
mod rpc;
pub mod state;

pub use state::{bridges, codex_seats, legacy_head, report_fences, reviews, seats, store};

use std::sync::Arc;
use std::time::Duration;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::clients;
use clankie_runtime::grpc::Meta;
use clankie_runtime::owner::{self, OwnerCheck};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::state::Guarded;
use clankie_runtime::{ClankieError, ErrorCode};
use store::Store;
use tokio::sync::{Mutex, watch};
use tonic::Request;

/// A project's worker cap when none is given.
pub const DEFAULT_WORKER_CAP: u32 = 4;

/// The longest transcript long poll.
pub const MAX_WAIT: Duration = Duration::from_secs(25);

/// The longest project focus, in characters.
pub const MAX_FOCUS: usize = 280;

/// The owner overrides autonomous work must find allowed.
pub const OVERRIDES: &[&str] = &["everyday", "outward", "machineSetup"];

/// The longest report text.
pub const MAX_REPORT: usize = clankie_types::fleet::limits::MESSAGE_TEXT;

struct Inner {
    owner: OwnerCheck,
    store: Mutex<Store>,
    /// Seats, deliveries and peer receipts (`mailbox/seats.json`), never
    /// saved over while unreadable.
    book: Mutex<Guarded<seats::SeatBook>>,
    /// Inbound report fences and seals (`mailbox/report-fences.json`),
    /// never saved over while unreadable. Locked after `store`.
    fences: Mutex<Guarded<report_fences::ReportFences>>,
    /// This instance: it holds `mailbox/instance.lock` for its life, so a
    /// fence another instance left is no live request's.
    instance: String,
    _instance_lock: clankie_runtime::instance::Instance,
    /// Landing review candidates (`mailbox/reviews.json`) and their patches.
    reviews: Mutex<Guarded<reviews::ReviewBook>>,
    patches_dir: std::path::PathBuf,
    /// Hired Codex seats' registrations (`local-codex-seats.json`).
    codex_seats: Mutex<codex_seats::CodexSeats>,
    /// Bumped whenever a delivery is queued; seat polls wait on it.
    queued: watch::Sender<u64>,
    /// `audit/peer-messages.jsonl`: one line per send (ids only, no text).
    audit_path: std::path::PathBuf,
    /// What each seat's bridge was seen doing: a live delivery route, and
    /// the doctor's observations.
    bridges: parking_lot::Mutex<bridges::Bridges>,
    /// This process's kernel start, for a bridge's freshness (none: unknown).
    started: Option<u64>,
    /// Bumped after every transcript append; long polls wait on it.
    appended: watch::Sender<u64>,
    admission: clients::AdmissionClient,
    auto: clients::AutoClient,
    tracker: clients::TrackerClient,
    paths: StatePaths,
}

/// The mailbox; cheap to clone.
#[derive(Clone)]
pub struct MailboxService {
    inner: Arc<Inner>,
}

pub(crate) fn internal(e: impl std::fmt::Display) -> ClankieError {
    ErrorCode::Internal.err(format!("the mailbox could not save its state: {e}"))
}

/// Changes one of the mailbox's guarded files (`what` names it): the only
/// way any of them changes, so memory never holds what the file does not.
/// A refusal of `change` keeps both as they were; an unreadable file is
/// refused as unavailable until the owner inspects it; a failed write is
/// internal.
pub(crate) fn change<T, R>(
    file: &mut clankie_runtime::state::Guarded<T>,
    what: &str,
    change: impl FnOnce(&mut T) -> Result<R, ClankieError>,
) -> Result<R, ClankieError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + Clone,
{
    change_when(file, what, |next| change(next).map(|out| (out, true)))
}

/// [`change`] for a change that says whether it changed anything
/// (`false`: nothing is written).
pub(crate) fn change_when<T, R>(
    file: &mut clankie_runtime::state::Guarded<T>,
    what: &str,
    change: impl FnOnce(&mut T) -> Result<(R, bool), ClankieError>,
) -> Result<R, ClankieError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + Clone,
{
    use clankie_runtime::state::{GuardError, Refused};
    file.try_update_when(change).map_err(|e| match e {
        Refused::Change(e) => e,
        Refused::Guard(GuardError::Unreadable) => ErrorCode::ServiceUnavailable.err(format!(
            "{what} cannot be read; the owner must inspect it before changes"
        )),
        Refused::Guard(GuardError::Write(e)) => internal(e),
    })
}

pub(crate) fn short_id(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// How often the open hires are observed for completions and closed panes.
pub const HARVEST_EVERY: Duration = Duration::from_secs(5);

/// How to build the mailbox.
pub struct Options {
    pub paths: StatePaths,
    /// The completion sweep's clock ([`HARVEST_EVERY`]; shorter in tests).
    pub harvest_every: Duration,
}

impl Options {
    pub fn new(paths: StatePaths) -> Self {
        Options {
            paths,
            harvest_every: HARVEST_EVERY,
        }
    }

    /// Opens the state under `$CLANKIE_STATE/mailbox` and the owner
    /// credential, and starts the completion sweep.
    pub async fn build(
        self,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> anyhow::Result<MailboxService> {
        let mailbox = MailboxService::open(self.paths)?;
        tokio::spawn(mailbox.clone().harvest(self.harvest_every, shutdown));
        Ok(mailbox)
    }
}

impl MailboxService {
    fn open(paths: StatePaths) -> anyhow::Result<Self> {
        let owner = OwnerCheck::load(&paths.owner_credential())?;
        let token = owner::read_owner_token(&paths.owner_credential())?;
        let dir = paths.service_dir("mailbox");
        clankie_runtime::state::private_dir(&dir)?;
        let instance = clankie_runtime::instance::hold(&dir.join("instance.lock"))?;
        let store = Store::open(dir.clone())?;
        let fences = Guarded::load(
            dir.join("report-fences.json"),
            report_fences::ReportFences::default,
            report_fences::ReportFences::default,
        );
        if let Some(e) = fences.unreadable() {
            tracing::error!(error = %e, "report fences unreadable; reports stay uncertain until the owner inspects them");
        }
        let book_path = paths.service_dir("mailbox").join("seats.json");
        let book = Guarded::load(
            book_path,
            seats::SeatBook::default,
            seats::SeatBook::default,
        );
        if let Some(e) = book.unreadable() {
            tracing::error!(error = %e, "seat book unreadable; peer messages are refused until the owner inspects it");
        }
        let (queued, _) = watch::channel(0);
        let reviews_path = paths.service_dir("mailbox").join("reviews.json");
        let patches_dir = paths.service_dir("mailbox").join("patches");
        clankie_runtime::state::private_dir(&patches_dir)?;
        let review_book = Guarded::load(
            reviews_path,
            reviews::ReviewBook::default,
            reviews::ReviewBook::default,
        );
        if let Some(e) = review_book.unreadable() {
            tracing::error!(error = %e, "review records unreadable; reviews are refused until the owner inspects them");
        }
        let (codex_seats, aside) = codex_seats::CodexSeats::open(paths.root());
        if aside.is_some() {
            tracing::error!(
                "the Codex seat registrations were unreadable; the file was moved aside and no Codex seat is restored"
            );
        }
        let admission = clankie_runtime::clients::admission(&paths, Meta::owner(&token));
        let (appended, _) = watch::channel(0);
        let auto = clankie_runtime::clients::auto(&paths, Meta::owner(&token));
        let tracker = clankie_runtime::clients::tracker(&paths, Meta::owner(&token));
        Ok(MailboxService {
            inner: Arc::new(Inner {
                owner,
                store: Mutex::new(store),
                book: Mutex::new(book),
                fences: Mutex::new(fences),
                instance: instance.id.clone(),
                _instance_lock: instance,
                reviews: Mutex::new(review_book),
                patches_dir,
                codex_seats: Mutex::new(codex_seats),
                queued,
                bridges: parking_lot::Mutex::new(bridges::Bridges::default()),
                started: clankie_runtime::peer::own_start_time(),
                audit_path: paths.audit_dir().join("peer-messages.jsonl"),
                appended,
                admission,
                auto,
                tracker,
                paths: paths.clone(),
            }),
        })
    }

    /// Ready while its state, seat book and review records are readable
    /// (each is read once, at start, and never saved over while unreadable).
    pub fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        let inner = self.inner.clone();
        let snapshot = parking_lot::Mutex::new(None::<Option<String>>);
        clankie_runtime::readiness::Readiness::check(move || {
            let mut cached = snapshot.lock();
            if let Some(c) = &*cached {
                return c.clone();
            }
            let (Ok(store), Ok(book), Ok(reviews)) = (
                inner.store.try_lock(),
                inner.book.try_lock(),
                inner.reviews.try_lock(),
            ) else {
                return None;
            };
            let problem = if store.unreadable() {
                Some("mailbox state unreadable".to_string())
            } else if book.unreadable().is_some() {
                Some("seat book unreadable".into())
            } else if reviews.unreadable().is_some() {
                Some("review records unreadable".into())
            } else {
                None
            };
            *cached = Some(problem.clone());
            problem
        })
    }

    /// The tonic routes for this service.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(
            mailbox_pb::mailbox_server::MailboxServer::new(self.clone())
                .max_decoding_message_size(clankie_runtime::limits::MAX_CANDIDATE_MESSAGE),
        )
    }

    pub(crate) fn owner<T>(&self, req: &Request<T>) -> Result<(), ClankieError> {
        self.inner.owner.verify(req.metadata())
    }

    /// A test crash point (`mailbox/crash-once-STEP`): aborts there.
    pub(crate) fn crash_point(&self, step: &str) {
        clankie_runtime::instance::crash_once(&self.inner.paths.service_dir("mailbox"), step);
    }

    pub(crate) fn writable(store: &Store) -> Result<(), ClankieError> {
        if store.unreadable() {
            return Err(ErrorCode::ServiceUnavailable.err(
                "the mailbox state cannot be read; the owner must inspect it before changes",
            ));
        }
        Ok(())
    }
}

impl clankie_runtime::main_kit::Served for MailboxService {
    fn routes(&self) -> tonic::service::Routes {
        MailboxService::routes(self)
    }

    fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        MailboxService::readiness(self)
    }
}
