//! The mailbox service.
//!
//! Owns: projects (with a revision fencing every edit), conversations (the
//! global head and lead chats) and their transcripts, hires (a pane opened
//! in a linked tmux session for a project, owned by the conversation that
//! hired it), the roster, and worker reports (`message_clankie`) delivered
//! to the hiring lead as untrusted agent output, with receipts that never
//! reroute or replay an accepted report.
//!
//! Does not own: admission (a report's pane comes from the admission ticket
//! it carries, rechecked here), pane membership reads, or any tool.

mod panes;
pub mod reviews;
pub mod seats;
pub mod store;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clankie_proto::admission::v1 as apb;
use clankie_proto::auto::v1 as aupb;
use clankie_proto::common::v1::AdmissionMode;
use clankie_proto::mailbox::v1 as pb;
use clankie_runtime::grpc::{self, Client, Meta};
use clankie_runtime::owner::{self, OwnerCheck};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::sandbox;
use clankie_runtime::state::{GuardError, Guarded};
use clankie_runtime::{ClankieError, ErrorCode, leads};
use serde_json::json;
use tokio::sync::{Mutex, watch};
use tonic::{Request, Response, Status};

use clankie_runtime::refuse::mailbox as refuse;
use store::{ConversationRec, EntryRec, HEAD, HireRec, ProjectRec, Store, WorkspaceRec, now_ms};

/// A project's worker cap when none is given.
pub const DEFAULT_WORKER_CAP: u32 = 4;
/// The longest transcript long poll.
pub const MAX_WAIT: Duration = Duration::from_secs(25);
/// The longest project focus, in characters.
pub const MAX_FOCUS: usize = 280;
/// The owner overrides autonomous work must find allowed.
pub const OVERRIDES: &[&str] = &["everyday", "outward", "machineSetup"];

/// The longest report text.
pub const MAX_REPORT: usize = 32 << 10;

struct Inner {
    owner: OwnerCheck,
    store: Mutex<Store>,
    /// Seats, deliveries and peer receipts (`mailbox/seats.json`); the flag
    /// is set when the file could not be read.
    book: Mutex<Guarded<seats::SeatBook>>,
    /// Landing review candidates (`mailbox/reviews.json`) and their patches.
    reviews: Mutex<Guarded<reviews::ReviewBook>>,
    patches_dir: std::path::PathBuf,
    /// Bumped whenever a delivery is queued; seat polls wait on it.
    queued: watch::Sender<u64>,
    /// `audit/peer-messages.jsonl`: one line per send (ids only, no text).
    audit_path: std::path::PathBuf,
    /// When each seat last polled: a live delivery route.
    polled: parking_lot::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    /// Bumped after every transcript append; long polls wait on it.
    appended: watch::Sender<u64>,
    admission: apb::admission_client::AdmissionClient<Client>,
    auto: aupb::auto_client::AutoClient<Client>,
    tracker: clankie_proto::tracker::v1::tracker_client::TrackerClient<Client>,
    paths: StatePaths,
}

/// The mailbox; cheap to clone.
#[derive(Clone)]
pub struct MailboxService {
    inner: Arc<Inner>,
}

fn internal(e: impl std::fmt::Display) -> ClankieError {
    ErrorCode::Internal.err(format!("the mailbox could not save its state: {e}"))
}

fn project_pb(p: &ProjectRec) -> pb::Project {
    pb::Project {
        project_id: p.project_id.clone(),
        name: p.name.clone(),
        workspaces: p
            .workspaces
            .iter()
            .map(|w| pb::Workspace {
                workspace_id: w.workspace_id.clone(),
                path: w.path.clone(),
                machine: w.machine.clone(),
                platform: w.platform.clone(),
                convention: w.convention.clone(),
            })
            .collect(),
        lead_conversation_id: p.lead_conversation_id.clone(),
        worker_cap: p.worker_cap,
        standing_reviewer: p.standing_reviewer,
        revision: p.revision,
        created_at_ms: p.created_at_ms,
        tracker: p.tracker.clone(),
        tracker_team: p.tracker_team.clone(),
        linear_project_id: p.linear_project_id.clone(),
        auto: p.auto,
        focus: p.focus.clone(),
        overrides: p.overrides.clone().into_iter().collect(),
    }
}

/// A transcript entry that carries its own receipt id: the id is 1 to 128
/// bytes, the text 1 byte to 32 KiB.
fn check_entry(what: &str, id: &str, text: &str) -> Result<(), ClankieError> {
    if id.is_empty() || id.len() > 128 {
        return Err(
            ErrorCode::InvalidArgument.err(format!("a {what} needs an id (at most 128 bytes)"))
        );
    }
    if text.trim().is_empty() || text.len() > MAX_REPORT {
        return Err(ErrorCode::InvalidArgument.err(format!("a {what} is 1 byte to 32 KiB of text")));
    }
    Ok(())
}

/// The project a hire goes to. A configured lead (one that owns projects)
/// hires only into its own projects and must name one when it owns
/// several; any other conversation names the project.
fn attribute(
    state: &store::StateFile,
    conversation_id: &str,
    named: &str,
) -> Result<ProjectRec, ClankieError> {
    let projects: Vec<pb::Project> = state.projects.iter().map(project_pb).collect();
    let conversation = state
        .conversations
        .iter()
        .find(|c| c.conversation_id == conversation_id)
        .map(conversation_pb)
        .filter(|c| leads::configured(c, &projects));
    let Some(lead) = conversation else {
        return state
            .projects
            .iter()
            .find(|p| p.project_id == named || p.name == named)
            .cloned()
            .ok_or_else(|| ErrorCode::ProjectNotFound.err(format!("no project {named}")));
    };
    let owned: Vec<&ProjectRec> = state
        .projects
        .iter()
        .zip(&projects)
        .filter(|(_, p)| leads::owns(&lead, p))
        .map(|(r, _)| r)
        .collect();
    let names = || {
        owned
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if named.is_empty() {
        return match owned.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(ErrorCode::NotOwner
                .err("this lead owns no registered project; bind one or name a project")),
            _ => Err(ErrorCode::InvalidArgument.err(format!(
                "this lead owns several projects ({}): name one with --project",
                names()
            ))),
        };
    }
    owned
        .iter()
        .find(|p| p.project_id == named || p.name == named)
        .map(|p| (*p).clone())
        .ok_or_else(|| {
            ErrorCode::NotOwner.err(format!(
                "this lead owns {}; it cannot hire into {named}'s folder",
                names()
            ))
        })
}

/// The staffing rule of an autonomous turn: the switch on, the owner's saved
/// global autonomy Full, the project on Auto, and its overrides allowing
/// everyday and outward work and lead-owned machine setup. Otherwise the
/// turn may only propose, and the refusal says why.
fn staffing(autonomy: &aupb::Autonomy, project: &ProjectRec) -> Result<(), ClankieError> {
    let why = if !autonomy.readable {
        Some("the autonomy switch cannot be read, so it reads as off".to_string())
    } else if !autonomy.on {
        Some("the autonomy switch is off".to_string())
    } else if autonomy.level != "full" {
        Some(format!(
            "the owner's saved global autonomy is {}, not full",
            if autonomy.level.is_empty() {
                "off"
            } else {
                &autonomy.level
            }
        ))
    } else if !project.auto {
        Some(format!("project {} is not on Auto", project.name))
    } else {
        OVERRIDES
            .iter()
            .find(|k| project.overrides.get(**k) == Some(&false))
            .map(|k| format!("project {}'s overrides do not allow {k} work", project.name))
    };
    match why {
        Some(why) => Err(ErrorCode::ProposeOnly.err(format!(
            "an autonomous turn may only propose this hire: {why}"
        ))),
        None => Ok(()),
    }
}

/// The project named `which` (id or name), if it is still at `expected`.
fn project_at<'a>(
    state: &'a mut store::StateFile,
    which: &str,
    expected: u64,
) -> Result<&'a mut ProjectRec, ClankieError> {
    let project = state
        .projects
        .iter_mut()
        .find(|p| p.project_id == which || p.name == which)
        .ok_or_else(|| ErrorCode::ProjectNotFound.err(format!("no project {which}")))?;
    if project.revision != expected {
        return Err(ErrorCode::StaleRevision.err(format!(
            "the project is at revision {}, not {expected}; read it again",
            project.revision
        )));
    }
    Ok(project)
}

/// Where a project's unpinned tracker calls go: `(route, team, linear
/// project)`, or why they cannot go anywhere.
fn tracker_route(p: &ProjectRec) -> Result<(&'static str, String, String), String> {
    match p.tracker.as_str() {
        "builtin" => Ok(("builtin", p.tracker_team.clone(), String::new())),
        "linear" => Ok(("linear", String::new(), p.linear_project_id.clone())),
        _ if !p.workspaces.is_empty() && p.workspaces.iter().all(|w| w.convention == "linear") => {
            Ok(("linear", String::new(), p.linear_project_id.clone()))
        }
        _ => Err(format!(
            "project {} has no tracker binding and its workspaces' saved conventions are not all linear: clankie project set {} --tracker builtin|linear",
            p.name, p.name
        )),
    }
}

fn conversation_pb(c: &ConversationRec) -> pb::Conversation {
    pb::Conversation {
        conversation_id: c.conversation_id.clone(),
        kind: c.kind.clone(),
        title: c.title.clone(),
        created_at_ms: c.created_at_ms,
        removed: c.removed,
        workspace: c.workspace.clone(),
        projects: c.projects.clone(),
    }
}

fn entry_pb(e: EntryRec) -> pb::Entry {
    pb::Entry {
        seq: e.seq,
        kind: e.kind,
        role: e.role,
        text: e.text,
        source: e.source,
        untrusted: e.untrusted,
        at_ms: e.at_ms,
        receipt_id: e.receipt_id,
    }
}

fn hire_pb(h: &HireRec, owner_present: bool) -> pb::HireRecord {
    pb::HireRecord {
        hire_id: h.hire_id.clone(),
        conversation_id: h.conversation_id.clone(),
        project_id: h.project_id.clone(),
        role: h.role.clone(),
        link_id: h.link_id.clone(),
        fleet: h.fleet.clone(),
        pane_id: h.pane_id.clone(),
        workspace: h.workspace.clone(),
        command: h.command.clone(),
        created_at_ms: h.created_at_ms,
        ended: h.ended.clone(),
        owner_present,
        occupant_pid: h.occupant_pid,
        occupant_pidfs_id: h.occupant_pidfs_id,
        occupant_start_time: h.occupant_start_time,
        sandboxed: h.sandboxed,
    }
}

/// Opens a hired pane in a linked session (tmux or Herdr).
async fn open_pane(
    link: &apb::FleetLink,
    cwd: &str,
    env: &[(&str, String)],
    command: &[String],
) -> Result<String, panes::TmuxError> {
    if link.kind == "herdr" {
        return panes::herdr::open(
            std::path::Path::new(&link.socket),
            &link.session,
            cwd,
            env,
            command,
        )
        .await;
    }
    let session = panes::session(&link.socket, &link.session).await?;
    panes::open(&link.socket, &session, cwd, env, command).await
}

async fn close_pane(link: &apb::FleetLink, pane: &str) -> Result<(), panes::TmuxError> {
    if link.kind == "herdr" {
        return panes::herdr::close(std::path::Path::new(&link.socket), pane).await;
    }
    panes::close(&link.socket, pane).await
}

/// Live panes of a linked session; links that are not local have none.
async fn live_panes_of(link: &apb::FleetLink) -> Result<Vec<String>, panes::TmuxError> {
    match link.kind.as_str() {
        "tmux" => panes::live(&link.socket).await,
        "herdr" => panes::herdr::live(std::path::Path::new(&link.socket)).await,
        _ => Err(panes::TmuxError("not a local link".into())),
    }
}

fn short_id(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// Whether the conversation exists and was not removed.
fn present(state: &store::StateFile, conversation_id: &str) -> bool {
    state
        .conversations
        .iter()
        .any(|c| c.conversation_id == conversation_id && !c.removed)
}

/// The calling conversation: the given one, or the global head.
fn caller(state: &store::StateFile, conversation_id: &str) -> Result<String, ClankieError> {
    let id = if conversation_id.is_empty() {
        HEAD
    } else {
        conversation_id
    };
    if !present(state, id) {
        return Err(ErrorCode::ConversationNotFound.err(format!("no conversation {id}")));
    }
    Ok(id.to_string())
}

/// Why peer messages are refused: the owner's switch, or a settings file
/// that cannot be read (never reported as the owner's choice).
fn peers_off(settings: &apb::FleetSettings) -> ClankieError {
    if settings.unreadable {
        ErrorCode::SettingsUnreadable.err(
            "the fleet settings cannot be read, so peer messages read as off until the owner repairs them",
        )
    } else {
        ErrorCode::PeerMessagesOff.err("the owner turned peer messages off")
    }
}

/// How to build the mailbox.
pub struct Options {
    pub paths: StatePaths,
}

impl Options {
    pub fn new(paths: StatePaths) -> Self {
        Options { paths }
    }

    /// Opens the state under `$CLANKIE_STATE/mailbox` and the owner credential.
    pub async fn build(
        self,
        _shutdown: tokio_util::sync::CancellationToken,
    ) -> anyhow::Result<MailboxService> {
        MailboxService::open(self.paths)
    }
}

impl MailboxService {
    fn open(paths: StatePaths) -> anyhow::Result<Self> {
        let owner = OwnerCheck::load(&paths.owner_credential())?;
        let token = owner::read_owner_token(&paths.owner_credential())?;
        let store = Store::open(paths.service_dir("mailbox"))?;
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
        let admission = clankie_runtime::clients::admission(&paths, Meta::owner(&token));
        let (appended, _) = watch::channel(0);
        let auto = clankie_runtime::clients::auto(&paths, Meta::owner(&token));
        let tracker = clankie_runtime::clients::tracker(&paths, Meta::owner(&token));
        Ok(MailboxService {
            inner: Arc::new(Inner {
                owner,
                store: Mutex::new(store),
                book: Mutex::new(book),
                reviews: Mutex::new(review_book),
                patches_dir,
                queued,
                polled: parking_lot::Mutex::new(std::collections::HashMap::new()),
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
            let problem = if store.unreadable {
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
            pb::mailbox_server::MailboxServer::new(self.clone())
                .max_decoding_message_size(clankie_runtime::limits::MAX_CANDIDATE_MESSAGE),
        )
    }

    fn owner<T>(&self, req: &Request<T>) -> Result<(), Status> {
        self.inner.owner.verify(req.metadata()).map_err(refuse)
    }

    fn writable(store: &Store) -> Result<(), ClankieError> {
        if store.unreadable {
            return Err(ErrorCode::ServiceUnavailable.err(
                "the mailbox state cannot be read; the owner must inspect it before changes",
            ));
        }
        Ok(())
    }

    /// The pane principal behind a worker request's admission ticket.
    async fn pane_principal<T>(
        &self,
        req: &Request<T>,
    ) -> Result<clankie_proto::common::v1::Principal, ClankieError> {
        let ticket = grpc::ticket(req.metadata())
            .ok_or_else(|| {
                ErrorCode::FleetCredentialRequired.err("the request carries no admission ticket")
            })?
            .to_string();
        let mut call = Request::new(apb::RecheckRequest { ticket });
        call.set_timeout(Duration::from_secs(5));
        let principal = self
            .inner
            .admission
            .clone()
            .recheck(call)
            .await
            .map_err(|s| ClankieError::from_status(&s))?
            .into_inner()
            .principal
            .unwrap_or_default();
        if principal.mode != AdmissionMode::Local as i32 || principal.pane_id.is_empty() {
            return Err(ErrorCode::LocalProcessMembershipRequired
                .err("reports need a proven pane; a bearer link cannot report"));
        }
        Ok(principal)
    }

    /// Settles a retired hire's tracker bookkeeping: its live leases in the
    /// project's built-in team are released, each issue gets a `released`
    /// event, under receipts of their own. A project whose tracker is not
    /// built in here, or is gone, gets no issue effects (logged).
    async fn retire(&self, hire: &HireRec, project: Option<&ProjectRec>) {
        let team = match project {
            Some(p) if p.tracker == "builtin" && !p.tracker_team.is_empty() => {
                p.tracker_team.clone()
            }
            Some(p) => {
                tracing::info!(
                    hire = %hire.hire_id,
                    tracker = %p.tracker,
                    "hire.retired: no built-in tracker binding; no issue effects"
                );
                return;
            }
            None => {
                tracing::info!(hire = %hire.hire_id, "hire.retired: project gone; no issue effects");
                return;
            }
        };
        let mut req = Request::new(clankie_proto::tracker::v1::RetireHireRequest {
            actor: format!("hire:{}", hire.hire_id),
            hire_id: hire.hire_id.clone(),
            scope_team: team,
        });
        req.set_timeout(Duration::from_secs(10));
        match self.inner.tracker.clone().retire_hire(req).await {
            Ok(r) => tracing::info!(
                hire = %hire.hire_id,
                released = r.into_inner().released.len(),
                "hire.retired"
            ),
            Err(s) => tracing::warn!(
                hire = %hire.hire_id,
                reason = %ClankieError::from_status(&s).code,
                "hire.retire_failed"
            ),
        }
    }

    /// The switch and the saved level, read fresh; unreachable reads as
    /// off.
    async fn autonomy(&self) -> aupb::Autonomy {
        let mut call = Request::new(aupb::GetSwitchRequest {});
        call.set_timeout(Duration::from_secs(5));
        match self.inner.auto.clone().get_switch(call).await {
            Ok(r) => r.into_inner(),
            Err(s) => aupb::Autonomy {
                readable: false,
                problem: format!("the auto-scheduler cannot be reached: {}", s.message()),
                ..Default::default()
            },
        }
    }

    /// The local link a hire opens in.
    async fn fleet_status(&self) -> Result<apb::FleetStatusResponse, ClankieError> {
        let mut call = Request::new(apb::FleetStatusRequest {});
        call.set_timeout(Duration::from_secs(5));
        Ok(self
            .inner
            .admission
            .clone()
            .fleet_status(call)
            .await
            .map_err(|s| ClankieError::from_status(&s))?
            .into_inner())
    }

    /// Where a hire opens and how it starts.
    async fn launch(&self, link_id: &str) -> Result<Launch, ClankieError> {
        let status = self.fleet_status().await?;
        let sandbox_on = status.settings.as_ref().is_none_or(|s| s.worker_sandbox);
        let sandbox = if sandbox_on {
            Some(sandbox::Sandbox::probe().await?)
        } else {
            None
        };
        let sockets = status
            .links
            .iter()
            .filter(|l| l.kind == "tmux" || l.kind == "herdr")
            .map(|l| std::path::PathBuf::from(&l.socket))
            .collect();
        Ok(Launch {
            link: Self::pick_link(status.links, link_id)?,
            sandbox,
            sockets,
        })
    }

    async fn link(&self, link_id: &str) -> Result<apb::FleetLink, ClankieError> {
        Self::pick_link(self.fleet_status().await?.links, link_id)
    }

    fn pick_link(
        links: Vec<apb::FleetLink>,
        link_id: &str,
    ) -> Result<apb::FleetLink, ClankieError> {
        let mut local = links.into_iter().filter(|l| {
            (l.kind == "tmux" || l.kind == "herdr") && (link_id.is_empty() || l.link_id == link_id)
        });
        let first = local.next().ok_or_else(|| {
            ErrorCode::NoLinkedSession
                .err("no linked session to hire into: clankie fleet link --tmux SOCKET or --herdr")
        })?;
        if link_id.is_empty() && local.next().is_some() {
            return Err(ErrorCode::InvalidArgument
                .err("several linked sessions: choose one with its link id (--link)"));
        }
        Ok(first)
    }
}

/// How one hire starts: the link, a working bubblewrap when the worker
/// sandbox is on, and every linked multiplexer's socket (a confined hire
/// must not ask one for an unconfined pane).
struct Launch {
    link: apb::FleetLink,
    sandbox: Option<sandbox::Sandbox>,
    sockets: Vec<std::path::PathBuf>,
}

/// A seat counts as reachable while its bridge polled within this long.
pub const ROUTE_FRESH: Duration = Duration::from_secs(60);

fn receipt_pb(m: &seats::PeerMessageRec, original: bool) -> pb::PeerReceipt {
    pb::PeerReceipt {
        peer_message_id: m.id.clone(),
        receipt_id: m.receipt_id.clone(),
        sender_seat: m.sender_seat.clone(),
        recipient_seat: m.recipient_seat.clone(),
        state: m.state.clone(),
        outcome: m.outcome().into(),
        text: m.text.clone().unwrap_or_default(),
        created_at_ms: m.created_at_ms,
        settled_at_ms: m.settled_at_ms,
        follows: m.follows.clone(),
        original,
    }
}

fn delivery_pb(d: seats::DeliveryRec) -> pb::Delivery {
    pb::Delivery {
        delivery_id: d.delivery_id,
        kind: d.kind,
        from: d.from,
        text: d.text,
        created_at_ms: d.created_at_ms,
        peer_message_id: d.peer_message_id,
        follows: d.follows,
    }
}

impl MailboxService {
    fn save_book(&self, book: &Guarded<seats::SeatBook>) -> Result<(), ClankieError> {
        book.save().map_err(|e| match e {
            GuardError::Unreadable => ErrorCode::ServiceUnavailable
                .err("the seat book cannot be read; the owner must inspect it"),
            GuardError::Write(e) => internal(e),
        })
    }

    fn ticket_of<T>(req: &Request<T>) -> Result<String, ClankieError> {
        grpc::ticket(req.metadata())
            .map(str::to_string)
            .ok_or_else(|| {
                ErrorCode::FleetCredentialRequired.err("the request carries no admission ticket")
            })
    }

    /// The native seat behind a request: a proven pane process under the
    /// pane's foreground agent, observed fresh (never reused between
    /// requests). Returns the seat and the fleet settings.
    async fn native_seat<T>(
        &self,
        req: &Request<T>,
    ) -> Result<(seats::SeatRec, apb::FleetSettings), ClankieError> {
        let ticket = Self::ticket_of(req)?;
        // One call: admission rechecks the ticket's proof, then observes the
        // seat fresh (bearer tickets have no seat).
        let mut call = Request::new(apb::RecheckRequest { ticket });
        call.set_timeout(Duration::from_secs(5));
        let seat = self
            .inner
            .admission
            .clone()
            .observe_ticket_seat(call)
            .await
            .map_err(|s| {
                let e = ClankieError::from_status(&s);
                if e.code == ErrorCode::LocalProcessMembershipRequired {
                    ErrorCode::NativeSeatRequired.err(format!(
                        "a native seat is a proven pane process under the pane's foreground agent: {}",
                        e.message
                    ))
                } else {
                    e
                }
            })?
            .into_inner();
        let settings = seat.settings.unwrap_or_default();
        let agent = seat.agent.unwrap_or_default();
        let rec = seats::SeatRec {
            seat_id: seats::seat_id(
                &seat.link_id,
                &seat.pane_id,
                agent.pidfs_id,
                agent.start_time,
                agent.pid,
            ),
            fleet: seat.fleet,
            link_id: seat.link_id,
            pane_id: seat.pane_id,
            agent_pid: agent.pid,
            agent_pidfs_id: agent.pidfs_id,
            agent_start_time: agent.start_time,
            agent_executable: seat.agent_executable,
            gone: false,
        };
        {
            let mut book = self.inner.book.lock().await;
            if book.upsert_seat(rec.clone(), now_ms()) {
                self.save_book(&book)?;
            }
        }
        // A hire's occupant is recorded once proven.
        let mut store = self.inner.store.lock().await;
        if let Some(h) = store.state.hires.iter_mut().find(|h| {
            h.ended.is_empty()
                && h.link_id == rec.link_id
                && h.pane_id == rec.pane_id
                && h.occupant_pidfs_id == 0
        }) {
            h.occupant_pid = rec.agent_pid;
            h.occupant_pidfs_id = rec.agent_pidfs_id;
            h.occupant_start_time = rec.agent_start_time;
            if !store.unreadable {
                store.save().map_err(internal)?;
            }
        }
        Ok((rec, settings))
    }

    /// Appends one audit line (fsynced); a failure is logged, not fatal.
    fn audit(&self, line: &serde_json::Value) {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let result = (|| {
            if let Some(dir) = self.inner.audit_path.parent() {
                clankie_runtime::state::private_dir(dir)?;
            }
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.inner.audit_path)?;
            let mut bytes = serde_json::to_vec(line)?;
            bytes.push(b'\n');
            f.write_all(&bytes)?;
            f.sync_data()
        })();
        if let Err(e) = result {
            tracing::error!(error = %e, "peer message audit not written");
        }
    }

    fn reachable(&self, seat_id: &str) -> bool {
        self.inner
            .polled
            .lock()
            .get(seat_id)
            .is_some_and(|t| t.elapsed() < ROUTE_FRESH)
    }

    fn note_poll(&self, seat_id: &str) {
        self.inner
            .polled
            .lock()
            .insert(seat_id.to_string(), std::time::Instant::now());
    }

    /// Live panes per linked tmux server (links that cannot be listed are
    /// left out: unknown is not gone).
    async fn live_panes(&self) -> std::collections::HashMap<String, Vec<String>> {
        let links = {
            let mut call = Request::new(apb::FleetStatusRequest {});
            call.set_timeout(Duration::from_secs(5));
            self.inner
                .admission
                .clone()
                .fleet_status(call)
                .await
                .map(|r| r.into_inner().links)
                .unwrap_or_default()
        };
        let mut live = std::collections::HashMap::new();
        for l in &links {
            if let Ok(panes) = live_panes_of(l).await {
                live.insert(l.link_id.clone(), panes);
            }
        }
        live
    }

    /// Marks seats whose pane closed as gone (settling their messages).
    async fn sweep_gone(&self) -> Result<(), ClankieError> {
        let live = self.live_panes().await;
        let mut book = self.inner.book.lock().await;
        let closed: Vec<(String, String)> = book
            .seats
            .iter()
            .filter(|s| !s.gone)
            .filter(|s| {
                live.get(&s.link_id)
                    .is_some_and(|panes| !panes.contains(&s.pane_id))
            })
            .map(|s| (s.link_id.clone(), s.pane_id.clone()))
            .collect();
        let stale = book.supersede_stale(now_ms());
        if closed.is_empty() && !stale {
            return Ok(());
        }
        for (link, pane) in closed {
            book.pane_gone(&link, &pane, now_ms());
        }
        self.save_book(&book)
    }

    fn seat_pb(&self, s: &seats::SeatRec, hires: &[HireRec]) -> pb::Seat {
        let hire = hires
            .iter()
            .find(|h| h.ended.is_empty() && h.link_id == s.link_id && h.pane_id == s.pane_id);
        pb::Seat {
            seat_id: s.seat_id.clone(),
            fleet: s.fleet.clone(),
            pane_id: s.pane_id.clone(),
            link_id: s.link_id.clone(),
            hire_id: hire.map(|h| h.hire_id.clone()).unwrap_or_default(),
            role: hire.map(|h| h.role.clone()).unwrap_or_default(),
            project_id: hire.map(|h| h.project_id.clone()).unwrap_or_default(),
            agent_pid: s.agent_pid,
            agent_pidfs_id: s.agent_pidfs_id,
            agent_start_time: s.agent_start_time,
            agent_executable: s.agent_executable.clone(),
            reachable: !s.gone && self.reachable(&s.seat_id),
        }
    }
}

fn candidate_pb(c: &reviews::CandidateRec, patch: Vec<u8>) -> pb::ReviewCandidate {
    pb::ReviewCandidate {
        candidate_id: c.candidate_id.clone(),
        project_id: c.project_id.clone(),
        author_seat: c.author_seat.clone(),
        author_hire: c.author_hire.clone(),
        reviewer_seat: c.reviewer_seat.clone(),
        checkout: c.checkout.clone(),
        head: c.head.clone(),
        base: c.base.clone(),
        patch_id: c.patch_id.clone(),
        patch_sha256: c.patch_sha256.clone(),
        summary: c.summary.clone(),
        issue: c.issue.clone(),
        evidence: c.evidence.clone(),
        state: c.state.clone(),
        findings: c
            .findings
            .iter()
            .map(|f| pb::Finding {
                text: f.text.clone(),
                file: f.file.clone(),
                line: f.line,
            })
            .collect(),
        verdict_summary: c.verdict_summary.clone(),
        previous: c.previous.clone(),
        created_at_ms: c.created_at_ms,
        decided_at_ms: c.decided_at_ms,
        patch,
    }
}

impl MailboxService {
    fn save_reviews(&self, book: &Guarded<reviews::ReviewBook>) -> Result<(), ClankieError> {
        book.save().map_err(|e| match e {
            GuardError::Unreadable => ErrorCode::ServiceUnavailable
                .err("the review records cannot be read; the owner must inspect them"),
            GuardError::Write(e) => internal(e),
        })
    }

    /// The open hire holding a seat's pane.
    async fn hire_of(&self, seat: &seats::SeatRec) -> Option<HireRec> {
        self.inner
            .store
            .lock()
            .await
            .state
            .hires
            .iter()
            .find(|h| h.ended.is_empty() && h.link_id == seat.link_id && h.pane_id == seat.pane_id)
            .cloned()
    }

    /// Whether a seat is a reviewer of a project: its open hire there was
    /// hired as reviewer.
    async fn is_reviewer(&self, seat: &seats::SeatRec, project_id: &str) -> bool {
        self.hire_of(seat)
            .await
            .is_some_and(|h| h.project_id == project_id && h.role == "reviewer")
    }

    /// Queues a mailbox delivery to whoever holds a seat's pane now.
    async fn deliver(
        &self,
        seat: &seats::SeatRec,
        kind: &str,
        from: String,
        text: String,
    ) -> Result<(), ClankieError> {
        let mut book = self.inner.book.lock().await;
        book.deliveries.push(seats::DeliveryRec::new(
            short_id("dlv"),
            (&seat.link_id, &seat.pane_id, &seat.seat_id),
            kind,
            from,
            text,
            now_ms(),
        ));
        self.save_book(&book)?;
        drop(book);
        self.inner.queued.send_modify(|n| *n += 1);
        Ok(())
    }

    fn read_patch(&self, sha: &str) -> Vec<u8> {
        std::fs::read(self.inner.patches_dir.join(format!("{sha}.patch"))).unwrap_or_default()
    }
}

#[tonic::async_trait]
impl pb::mailbox_server::Mailbox for MailboxService {
    async fn add_project(
        &self,
        request: Request<pb::AddProjectRequest>,
    ) -> Result<Response<pb::Project>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        let name = req.name.trim().to_string();
        if !store::valid_project_name(&name) {
            return Err(refuse(ErrorCode::InvalidArgument.err(
                "a project name is 1-64 letters, digits, '-', '_' or '.', and not '.' or '..'",
            )));
        }
        let path = std::path::Path::new(&req.workspace);
        if !path.is_absolute() || !path.is_dir() {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("the workspace must be an existing absolute folder"),
            ));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store).map_err(refuse)?;
        if !req.lead_conversation_id.is_empty() && !present(&store.state, &req.lead_conversation_id)
        {
            return Err(refuse(
                ErrorCode::ConversationNotFound
                    .err(format!("no conversation {}", req.lead_conversation_id)),
            ));
        }
        let workspace = WorkspaceRec {
            workspace_id: short_id("ws"),
            path: req.workspace.clone(),
            machine: req.machine,
            platform: req.platform,
            convention: String::new(),
        };
        let project = match store.state.projects.iter_mut().find(|p| p.name == name) {
            // Adding to an existing project adds a workspace.
            Some(p) => {
                if p.workspaces.iter().any(|w| w.path == workspace.path) {
                    return Err(refuse(ErrorCode::ProjectExists.err(format!(
                        "{name} already has the workspace {}",
                        req.workspace
                    ))));
                }
                p.workspaces.push(workspace);
                p.revision += 1;
                p.clone()
            }
            None => {
                let p = ProjectRec {
                    project_id: short_id("prj"),
                    name,
                    workspaces: vec![workspace],
                    lead_conversation_id: req.lead_conversation_id,
                    worker_cap: if req.worker_cap == 0 {
                        DEFAULT_WORKER_CAP
                    } else {
                        req.worker_cap
                    },
                    standing_reviewer: req.standing_reviewer,
                    revision: 1,
                    created_at_ms: now_ms(),
                    tracker: String::new(),
                    tracker_team: String::new(),
                    linear_project_id: String::new(),
                    auto: false,
                    focus: String::new(),
                    overrides: Default::default(),
                };
                store.state.projects.push(p.clone());
                p
            }
        };
        store.save().map_err(|e| refuse(internal(e)))?;
        Ok(Response::new(project_pb(&project)))
    }

    async fn list_projects(
        &self,
        request: Request<pb::ListProjectsRequest>,
    ) -> Result<Response<pb::ListProjectsResponse>, Status> {
        self.owner(&request)?;
        let store = self.inner.store.lock().await;
        Ok(Response::new(pb::ListProjectsResponse {
            projects: store.state.projects.iter().map(project_pb).collect(),
        }))
    }

    async fn update_project(
        &self,
        request: Request<pb::UpdateProjectRequest>,
    ) -> Result<Response<pb::Project>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        let valid = |v: &str| matches!(v, "" | "builtin" | "linear");
        if let Some(f) = &req.focus
            && (f.chars().count() > MAX_FOCUS || f.contains(['\n', '\r']))
        {
            return Err(refuse(ErrorCode::InvalidArgument.err(format!(
                "a focus is one line of at most {MAX_FOCUS} characters ({} given)",
                f.chars().count()
            ))));
        }
        if let Some(k) = req
            .overrides
            .keys()
            .find(|k| !OVERRIDES.contains(&k.as_str()))
        {
            return Err(refuse(ErrorCode::InvalidArgument.err(format!(
                "override {k}: choose one of {}",
                OVERRIDES.join(", ")
            ))));
        }
        if let Some(t) = &req.tracker
            && !valid(t)
        {
            return Err(refuse(ErrorCode::InvalidArgument.err(format!(
                "tracker {t}: choose builtin or linear (or empty to unbind)"
            ))));
        }
        if let Some(c) = req.workspace_conventions.values().find(|c| !valid(c)) {
            return Err(refuse(ErrorCode::InvalidArgument.err(format!(
                "convention {c}: choose builtin or linear (or empty)"
            ))));
        }
        if let Some(u) = &req.linear_project_id
            && !u.is_empty()
            && uuid::Uuid::parse_str(u).is_err()
        {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("a Linear project is named by its UUID"),
            ));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store).map_err(refuse)?;
        let project =
            project_at(&mut store.state, &req.project, req.expected_revision).map_err(refuse)?;
        let mut next = project.clone();
        if let Some(t) = req.tracker {
            next.tracker = t;
        }
        if let Some(t) = req.tracker_team {
            next.tracker_team = t;
        }
        if let Some(u) = req.linear_project_id {
            next.linear_project_id = u;
        }
        for (which, convention) in &req.workspace_conventions {
            let ws = next
                .workspaces
                .iter_mut()
                .find(|w| &w.workspace_id == which || &w.path == which)
                .ok_or_else(|| {
                    refuse(
                        ErrorCode::InvalidArgument
                            .err(format!("the project has no workspace {which}")),
                    )
                })?;
            ws.convention = convention.clone();
        }
        if let Some(a) = req.auto {
            next.auto = a;
        }
        if let Some(f) = req.focus {
            next.focus = f;
        }
        for (k, v) in req.overrides {
            next.overrides.insert(k, v);
        }
        if next.tracker == "builtin" && next.tracker_team.is_empty() {
            return Err(refuse(ErrorCode::InvalidArgument.err(
                "a builtin binding names the tracker team its issues live in (--team KEY)",
            )));
        }
        next.revision += 1;
        *project = next.clone();
        store.save().map_err(|e| refuse(internal(e)))?;
        tracing::info!(project = %next.name, tracker = %next.tracker, "project.updated");
        Ok(Response::new(project_pb(&next)))
    }

    async fn wake(
        &self,
        request: Request<pb::WakeRequest>,
    ) -> Result<Response<pb::WakeResponse>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        check_entry("wake", &req.wake_id, &req.text).map_err(refuse)?;
        let mut store = self.inner.store.lock().await;
        // A wake id is accepted once: a repeat returns where it landed.
        if let Some(a) = store.receipt(&req.wake_id).cloned() {
            return Ok(Response::new(pb::WakeResponse {
                found: true,
                conversation_id: a.conversation_id,
                seq: a.seq,
                replayed: true,
                queued_to_seat: false,
                at_ms: 0,
            }));
        }
        Self::writable(&store).map_err(refuse)?;
        let conversation_id = if present(&store.state, &req.conversation_id) {
            req.conversation_id.clone()
        } else {
            HEAD.to_string()
        };
        let at_ms = now_ms();
        let entry = EntryRec {
            seq: 0,
            kind: "wake".into(),
            role: "system".into(),
            text: req.text.clone(),
            source: if req.source.is_empty() {
                "auto".into()
            } else {
                req.source.clone()
            },
            untrusted: false,
            at_ms,
            receipt_id: req.wake_id.clone(),
            hire_id: String::new(),
        };
        let seq = store
            .append(&conversation_id, entry)
            .map_err(|e| refuse(internal(e)))?;
        // A native seat holding the conversation hears it like any message.
        let seat = store
            .state
            .hires
            .iter()
            .find(|h| {
                h.ended.is_empty() && h.role == "lead" && h.conversation_id == conversation_id
            })
            .cloned();
        drop(store);
        self.inner.appended.send_modify(|n| *n += 1);
        let queued_to_seat = match seat {
            Some(h) => {
                let mut book = self.inner.book.lock().await;
                book.deliveries.push(seats::DeliveryRec::new(
                    short_id("dlv"),
                    (&h.link_id, &h.pane_id, ""),
                    "wake",
                    format!("wake:{}", req.wake_id),
                    req.text,
                    at_ms,
                ));
                let saved = self.save_book(&book);
                drop(book);
                self.inner.queued.send_modify(|n| *n += 1);
                saved.is_ok()
            }
            None => false,
        };
        tracing::info!(conversation = %conversation_id, source = %req.source, "wake.accepted");
        Ok(Response::new(pb::WakeResponse {
            found: true,
            conversation_id,
            seq,
            replayed: false,
            queued_to_seat,
            at_ms,
        }))
    }

    async fn wake_receipt(
        &self,
        request: Request<pb::WakeReceiptRequest>,
    ) -> Result<Response<pb::WakeResponse>, Status> {
        self.owner(&request)?;
        let id = request.into_inner().wake_id;
        let store = self.inner.store.lock().await;
        Ok(Response::new(match store.receipt(&id) {
            Some(a) => pb::WakeResponse {
                found: true,
                conversation_id: a.conversation_id.clone(),
                seq: a.seq,
                replayed: true,
                ..Default::default()
            },
            None => pb::WakeResponse::default(),
        }))
    }

    async fn resolve_caller(
        &self,
        request: Request<pb::ResolveCallerRequest>,
    ) -> Result<Response<pb::CallerInfo>, Status> {
        // The owner's route: the owner credential and no ticket.
        let owner = grpc::ticket(request.metadata()).is_none()
            && self.inner.owner.verify(request.metadata()).is_ok();
        let seat = if owner {
            None
        } else {
            match self.native_seat(&request).await {
                Ok((seat, _)) => Some(seat),
                Err(e) if e.code == ErrorCode::NativeSeatRequired => None,
                Err(e) => return Err(refuse(e)),
            }
        };
        let mut info = pb::CallerInfo::default();
        let hire = match &seat {
            Some(seat) => self.hire_of(seat).await.filter(|h| {
                h.occupant_pidfs_id == seat.agent_pidfs_id
                    && h.occupant_start_time == seat.agent_start_time
            }),
            None => None,
        };
        match (&seat, &hire) {
            (_, Some(h)) => {
                info.confirmed = true;
                info.hire_id = h.hire_id.clone();
                info.project_id = h.project_id.clone();
                info.conversation_id = h.conversation_id.clone();
                (info.role, info.actor) = match h.role.as_str() {
                    "lead" => ("lead".into(), format!("lead:{}", h.conversation_id)),
                    "reviewer" => ("reviewer".into(), format!("hire:{}", h.hire_id)),
                    _ => ("worker".into(), format!("hire:{}", h.hire_id)),
                };
            }
            (Some(seat), None) => {
                info.role = "worker".into();
                info.actor = format!("fleet:{}:pane:{}", seat.fleet, seat.pane_id);
            }
            (None, None) if owner => {
                info.role = "owner".into();
                info.actor = "owner".into();
            }
            (None, None) => {
                // A bearer or an unverified pane: the admitted principal.
                let ticket = Self::ticket_of(&request).map_err(refuse)?;
                let mut call = Request::new(apb::RecheckRequest { ticket });
                call.set_timeout(Duration::from_secs(5));
                let principal = self
                    .inner
                    .admission
                    .clone()
                    .recheck(call)
                    .await
                    .map_err(|s| refuse(ClankieError::from_status(&s)))?
                    .into_inner()
                    .principal
                    .unwrap_or_default();
                let pane = if principal.pane_id.is_empty() {
                    "unverified"
                } else {
                    principal.pane_id.as_str()
                };
                info.role = "worker".into();
                info.actor = format!("fleet:{}:pane:{pane}", principal.fleet_id);
            }
        }
        let repo = request.into_inner().repo;
        let store = self.inner.store.lock().await;
        let target = if !repo.is_empty() {
            let found = store.state.projects.iter().find(|p| {
                p.project_id == repo
                    || p.name == repo
                    || p.workspaces.iter().any(|w| w.path == repo)
            });
            match found {
                Some(p) => Some(Ok(p)),
                None => Some(Err(format!(
                    "repo {repo} names no registered project or workspace"
                ))),
            }
        } else if let Some(h) = &hire {
            match store
                .state
                .projects
                .iter()
                .find(|p| p.project_id == h.project_id)
            {
                Some(p) => Some(Ok(p)),
                None => Some(Err("the hire's project is gone".to_string())),
            }
        } else {
            None
        };
        match target {
            _ if store.unreadable => {
                info.route_problem = "the project registry cannot be read here".into();
            }
            None => info.route = "legacy".into(),
            Some(Err(problem)) => info.route_problem = problem,
            Some(Ok(p)) => {
                info.route_project = p.name.clone();
                match tracker_route(p) {
                    Ok((route, team, linear)) => {
                        info.route = route.into();
                        info.route_team = team;
                        info.route_linear_project = linear;
                    }
                    Err(problem) => info.route_problem = problem,
                }
            }
        }
        Ok(Response::new(info))
    }

    async fn remove_workspace(
        &self,
        request: Request<pb::RemoveWorkspaceRequest>,
    ) -> Result<Response<pb::Project>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        let mut store = self.inner.store.lock().await;
        Self::writable(&store).map_err(refuse)?;
        let open_hires: Vec<String> = store
            .state
            .hires
            .iter()
            .filter(|h| h.project_id == req.project_id && h.ended.is_empty())
            .map(|h| h.workspace.clone())
            .collect();
        let project =
            project_at(&mut store.state, &req.project_id, req.expected_revision).map_err(refuse)?;
        let index = project
            .workspaces
            .iter()
            .position(|w| w.workspace_id == req.workspace_id)
            .ok_or_else(|| {
                refuse(
                    ErrorCode::InvalidArgument
                        .err(format!("the project has no workspace {}", req.workspace_id)),
                )
            })?;
        if open_hires.contains(&project.workspaces[index].path) {
            return Err(refuse(
                ErrorCode::StaleRevision
                    .err("an open hire works in that workspace; close it first"),
            ));
        }
        // The record goes; the folder on disk is never touched.
        project.workspaces.remove(index);
        project.revision += 1;
        let out = project.clone();
        store.save().map_err(|e| refuse(internal(e)))?;
        Ok(Response::new(project_pb(&out)))
    }

    async fn add_conversation(
        &self,
        request: Request<pb::AddConversationRequest>,
    ) -> Result<Response<pb::Conversation>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        if !req.workspace.is_empty() && !std::path::Path::new(&req.workspace).is_absolute() {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("a lead's workspace is an absolute folder"),
            ));
        }
        if req.projects.len() > 64 || req.projects.iter().any(|p| p.is_empty() || p.len() > 64) {
            return Err(refuse(ErrorCode::InvalidArgument.err(
                "a lead owns at most 64 tracker projects, each a team key or a Linear project UUID",
            )));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store).map_err(refuse)?;
        let c = ConversationRec {
            conversation_id: short_id("conv"),
            kind: "lead".into(),
            title: req.title.chars().take(200).collect(),
            created_at_ms: now_ms(),
            removed: false,
            workspace: req.workspace,
            projects: req.projects,
        };
        store.state.conversations.push(c.clone());
        store.save().map_err(|e| refuse(internal(e)))?;
        Ok(Response::new(conversation_pb(&c)))
    }

    async fn list_conversations(
        &self,
        request: Request<pb::ListConversationsRequest>,
    ) -> Result<Response<pb::ListConversationsResponse>, Status> {
        self.owner(&request)?;
        let store = self.inner.store.lock().await;
        Ok(Response::new(pb::ListConversationsResponse {
            conversations: store
                .state
                .conversations
                .iter()
                .map(conversation_pb)
                .collect(),
        }))
    }

    async fn remove_conversation(
        &self,
        request: Request<pb::RemoveConversationRequest>,
    ) -> Result<Response<pb::Conversation>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        if req.conversation_id == HEAD {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("the global head cannot be removed"),
            ));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store).map_err(refuse)?;
        let c = store
            .state
            .conversations
            .iter_mut()
            .find(|c| c.conversation_id == req.conversation_id && !c.removed)
            .ok_or_else(|| {
                refuse(
                    ErrorCode::ConversationNotFound
                        .err(format!("no conversation {}", req.conversation_id)),
                )
            })?;
        c.removed = true;
        let out = c.clone();
        store.save().map_err(|e| refuse(internal(e)))?;
        Ok(Response::new(conversation_pb(&out)))
    }

    async fn read_transcript(
        &self,
        request: Request<pb::ReadTranscriptRequest>,
    ) -> Result<Response<pb::ReadTranscriptResponse>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        let wait = Duration::from_millis(u64::from(req.wait_ms)).min(MAX_WAIT);
        let mut changes = self.inner.appended.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            {
                let store = self.inner.store.lock().await;
                if !store
                    .state
                    .conversations
                    .iter()
                    .any(|c| c.conversation_id == req.conversation_id)
                {
                    return Err(refuse(
                        ErrorCode::ConversationNotFound
                            .err(format!("no conversation {}", req.conversation_id)),
                    ));
                }
                let last = store.last_seq(&req.conversation_id);
                if last > req.after || tokio::time::Instant::now() >= deadline {
                    let entries = store.entries(&req.conversation_id, req.after, 500);
                    return Ok(Response::new(pb::ReadTranscriptResponse {
                        entries: entries.into_iter().map(entry_pb).collect(),
                        last_seq: last,
                    }));
                }
            }
            let _ = tokio::time::timeout_at(deadline, changes.changed()).await;
        }
    }

    async fn hire(
        &self,
        request: Request<pb::HireRequest>,
    ) -> Result<Response<pb::HireRecord>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        if req.command.is_empty() {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("give the command the worker runs"),
            ));
        }
        let role = match req.role.as_str() {
            "" | "worker" => "worker",
            "reviewer" => "reviewer",
            "lead" => "lead",
            other => {
                return Err(refuse(
                    ErrorCode::InvalidArgument
                        .err(format!("role {other}: choose worker, reviewer or lead")),
                ));
            }
        };
        if let Some(word) = req.command.iter().find(|w| w.chars().any(char::is_control)) {
            // Herdr types the line into a terminal, where ^C or a newline
            // would act before any quoting does.
            return Err(refuse(ErrorCode::InvalidArgument.err(format!(
                "a command word holds a control character ({:?}); nothing was started",
                word.escape_default().to_string()
            ))));
        }
        let launch = self.launch(&req.link_id).await.map_err(refuse)?;
        let link = launch.link.clone();
        // An autonomous turn reads the switch and the saved level first.
        let autonomy = if req.autonomous {
            Some(self.autonomy().await)
        } else {
            None
        };
        // Hold the store across the cap check and the record, so two hires
        // cannot both take the last place.
        let mut store = self.inner.store.lock().await;
        Self::writable(&store).map_err(refuse)?;
        let conversation_id = caller(&store.state, &req.conversation_id).map_err(refuse)?;
        let project = attribute(&store.state, &conversation_id, &req.project).map_err(refuse)?;
        if let Some(autonomy) = autonomy {
            staffing(&autonomy, &project).map_err(refuse)?;
        }
        let workspace = if req.workspace_id.is_empty() {
            project.workspaces.first()
        } else {
            project
                .workspaces
                .iter()
                .find(|w| w.workspace_id == req.workspace_id)
        }
        .cloned()
        .ok_or_else(|| {
            refuse(ErrorCode::InvalidArgument.err("the project has no such workspace"))
        })?;
        // A conversation has one lead seat; a project one reviewer and its
        // worker cap.
        let working = store
            .state
            .hires
            .iter()
            .filter(|h| h.ended.is_empty() && h.role == role)
            .filter(|h| {
                if role == "lead" {
                    h.conversation_id == conversation_id
                } else {
                    h.project_id == project.project_id
                }
            })
            .count();
        let cap = if role == "worker" {
            project.worker_cap as usize
        } else {
            1
        };
        if working >= cap {
            return Err(refuse(ErrorCode::WorkerCapReached.err(format!(
                "{} already has {working} open {role} hire(s), its cap",
                project.name
            ))));
        }
        // With the worker sandbox on, the hire starts confined or not at all.
        let command = match &launch.sandbox {
            Some(sandbox) => {
                let mut protected =
                    sandbox::Protected::for_stack(&self.inner.paths, Path::new(&workspace.path));
                for socket in &launch.sockets {
                    protected.hide(socket);
                }
                sandbox::prepare(&protected).map_err(|e| {
                    refuse(
                        ErrorCode::WorkerSandboxUnavailable
                            .err(format!("could not prepare the sandbox's covers: {e}")),
                    )
                })?;
                sandbox.wrap(&protected, &req.command)
            }
            None => req.command.clone(),
        };
        // The hire learns where the gateway is, never where the state is:
        // the state folder holds the owner credential.
        let env = [
            ("CLANKIE_WORKER_PANE", "1".to_string()),
            ("CLANKIE_OPERATOR_TOKEN", String::new()),
            ("CLANKIE_CAPTAIN_TOKEN", String::new()),
            ("CLANKIE_STATE", String::new()),
            (
                "CLANKIE_GATEWAY_DISCOVERY",
                self.inner.paths.gateway_discovery().display().to_string(),
            ),
        ];
        let pane_id = open_pane(&link, &workspace.path, &env, &command)
            .await
            .map_err(|e| refuse(ErrorCode::ServiceUnavailable.err(e.0)))?;
        let hire = HireRec {
            hire_id: short_id("hire"),
            conversation_id,
            project_id: project.project_id.clone(),
            role: role.into(),
            link_id: link.link_id.clone(),
            fleet: link.fleet.clone(),
            pane_id,
            workspace: workspace.path.clone(),
            command: req.command,
            created_at_ms: now_ms(),
            ended: String::new(),
            hand_started: false,
            occupant_pid: 0,
            occupant_pidfs_id: 0,
            occupant_start_time: 0,
            sandboxed: launch.sandbox.is_some(),
        };
        store.state.hires.push(hire.clone());
        if let Err(e) = store.save() {
            // The pane must not outlive a hire that was never recorded.
            let _ = close_pane(&link, &hire.pane_id).await;
            store.state.hires.pop();
            return Err(refuse(internal(e)));
        }
        tracing::info!(hire = %hire.hire_id, project = %project.name, role, sandboxed = hire.sandboxed, "hired");
        Ok(Response::new(hire_pb(&hire, true)))
    }

    async fn close_hire(
        &self,
        request: Request<pb::CloseHireRequest>,
    ) -> Result<Response<pb::HireRecord>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        let mut store = self.inner.store.lock().await;
        Self::writable(&store).map_err(refuse)?;
        let caller_id = caller(&store.state, &req.conversation_id).map_err(refuse)?;
        let index = store
            .state
            .hires
            .iter()
            .position(|h| h.hire_id == req.hire_id)
            .ok_or_else(|| {
                refuse(ErrorCode::HireNotFound.err(format!("no hire {}", req.hire_id)))
            })?;
        let hire = store.state.hires[index].clone();
        let owner_present = present(&store.state, &hire.conversation_id);
        // A hire whose lead is gone is adopted by whoever acts on it.
        if owner_present && hire.conversation_id != caller_id {
            return Err(refuse(ErrorCode::NotOwner.err(format!(
                "hire {} belongs to conversation {}; only it may close the hire",
                hire.hire_id, hire.conversation_id
            ))));
        }
        if hire.ended.is_empty() {
            let link = self.link(&hire.link_id).await.map_err(refuse)?;
            close_pane(&link, &hire.pane_id)
                .await
                .map_err(|e| refuse(ErrorCode::ServiceUnavailable.err(e.0)))?;
        }
        {
            let mut book = self.inner.book.lock().await;
            book.pane_gone(&hire.link_id, &hire.pane_id, now_ms());
            self.save_book(&book).map_err(refuse)?;
        }
        let h = &mut store.state.hires[index];
        h.conversation_id = caller_id;
        let retiring = h.ended.is_empty();
        if retiring {
            h.ended = "closed".into();
        }
        let out = h.clone();
        // The attribution is the confirmed hire captured while its occupant
        // was proven, and the project's binding as saved now.
        let project = store
            .state
            .projects
            .iter()
            .find(|p| p.project_id == out.project_id)
            .cloned();
        store.save().map_err(|e| refuse(internal(e)))?;
        drop(store);
        if retiring && out.occupant_pidfs_id != 0 {
            self.retire(&out, project.as_ref()).await;
        }
        Ok(Response::new(hire_pb(&out, true)))
    }

    async fn roster(
        &self,
        request: Request<pb::RosterRequest>,
    ) -> Result<Response<pb::RosterResponse>, Status> {
        self.owner(&request)?;
        // Mark hires whose pane is gone, one pane listing per linked server.
        let live = self.live_panes().await;
        let mut store = self.inner.store.lock().await;
        let mut changed = false;
        for h in store.state.hires.iter_mut().filter(|h| h.ended.is_empty()) {
            if let Some(panes) = live.get(&h.link_id)
                && !panes.contains(&h.pane_id)
            {
                h.ended = "gone".into();
                changed = true;
            }
        }
        if changed && !store.unreadable {
            store.save().map_err(|e| refuse(internal(e)))?;
        }
        let hires = store
            .state
            .hires
            .iter()
            .map(|h| hire_pb(h, present(&store.state, &h.conversation_id)))
            .collect();
        Ok(Response::new(pb::RosterResponse { hires }))
    }

    async fn report(
        &self,
        request: Request<pb::ReportRequest>,
    ) -> Result<Response<pb::ReportResponse>, Status> {
        let principal = self.pane_principal(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        let kind = match req.kind.as_str() {
            "" | "message" => "message",
            "watch" => "watch",
            "wake" => "wake",
            other => {
                return Err(refuse(
                    ErrorCode::InvalidArgument.err(format!("report kind {other}")),
                ));
            }
        };
        check_entry("report", &req.receipt_id, &req.text).map_err(refuse)?;
        let mut store = self.inner.store.lock().await;
        // An accepted receipt returns where it went: never rerouted, never
        // written twice, whatever changed since.
        if let Some(a) = store.receipt(&req.receipt_id).cloned() {
            return Ok(Response::new(pb::ReportResponse {
                receipt_id: req.receipt_id,
                conversation_id: a.conversation_id,
                seq: a.seq,
                replayed: true,
                hire_id: a.hire_id,
            }));
        }
        let hire = store
            .state
            .hires
            .iter()
            .find(|h| {
                h.ended.is_empty()
                    && h.link_id == principal.link_id
                    && h.pane_id == principal.pane_id
            })
            .cloned();
        // The hiring lead, or the global head when the lead is gone or the
        // seat was started by hand.
        let (conversation_id, hire_id, source) = match &hire {
            Some(h) if present(&store.state, &h.conversation_id) => (
                h.conversation_id.clone(),
                h.hire_id.clone(),
                format!("hire:{}", h.hire_id),
            ),
            Some(h) => (
                HEAD.to_string(),
                h.hire_id.clone(),
                format!("hire:{}", h.hire_id),
            ),
            None => (
                HEAD.to_string(),
                String::new(),
                format!("pane:{}:{}", principal.link_id, principal.pane_id),
            ),
        };
        let entry = EntryRec {
            seq: 0,
            kind: kind.into(),
            role: "agent".into(),
            text: req.text,
            source,
            untrusted: true,
            at_ms: now_ms(),
            receipt_id: req.receipt_id.clone(),
            hire_id: hire_id.clone(),
        };
        let seq = store
            .append(&conversation_id, entry)
            .map_err(|e| refuse(internal(e)))?;
        drop(store);
        self.inner.appended.send_modify(|n| *n += 1);
        Ok(Response::new(pb::ReportResponse {
            receipt_id: req.receipt_id,
            conversation_id,
            seq,
            replayed: false,
            hire_id,
        }))
    }
    async fn message_seat(
        &self,
        request: Request<pb::MessageSeatRequest>,
    ) -> Result<Response<pb::MessageSeatResponse>, Status> {
        self.owner(&request)?;
        let req = request.into_inner();
        if req.text.trim().is_empty() || req.text.len() > MAX_REPORT {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("a message is 1 byte to 32 KiB of text"),
            ));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store).map_err(refuse)?;
        let caller_id = caller(&store.state, &req.conversation_id).map_err(refuse)?;
        let index = store
            .state
            .hires
            .iter()
            .position(|h| h.hire_id == req.hire_id && h.ended.is_empty())
            .ok_or_else(|| {
                refuse(ErrorCode::HireNotFound.err(format!("no open hire {}", req.hire_id)))
            })?;
        let hire = store.state.hires[index].clone();
        // A hire whose lead is gone is adopted by the conversation messaging it.
        let adopted = !present(&store.state, &hire.conversation_id);
        if adopted {
            store.state.hires[index].conversation_id = caller_id.clone();
            store.save().map_err(|e| refuse(internal(e)))?;
        }
        let owner_conversation_id = store.state.hires[index].conversation_id.clone();
        drop(store);
        let delivery_id = short_id("dlv");
        {
            let mut book = self.inner.book.lock().await;
            book.deliveries.push(seats::DeliveryRec::new(
                delivery_id.clone(),
                (&hire.link_id, &hire.pane_id, ""),
                "lead",
                format!("conversation:{caller_id}"),
                req.text,
                now_ms(),
            ));
            self.save_book(&book).map_err(refuse)?;
        }
        self.inner.queued.send_modify(|n| *n += 1);
        Ok(Response::new(pb::MessageSeatResponse {
            delivery_id,
            owner_conversation_id,
            adopted,
        }))
    }

    async fn seat_poll(
        &self,
        request: Request<pb::SeatPollRequest>,
    ) -> Result<Response<pb::SeatPollResponse>, Status> {
        let (seat, _) = self.native_seat(&request).await.map_err(refuse)?;
        let wait = Duration::from_millis(u64::from(request.into_inner().wait_ms)).min(MAX_WAIT);
        let deadline = tokio::time::Instant::now() + wait;
        let mut changes = self.inner.queued.subscribe();
        loop {
            self.note_poll(&seat.seat_id);
            let pending = self.inner.book.lock().await.pending(&seat);
            if !pending.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(Response::new(pb::SeatPollResponse {
                    seat_id: seat.seat_id,
                    deliveries: pending.into_iter().map(delivery_pb).collect(),
                }));
            }
            let _ = tokio::time::timeout_at(deadline, changes.changed()).await;
        }
    }

    async fn seat_ack(
        &self,
        request: Request<pb::SeatAckRequest>,
    ) -> Result<Response<pb::SeatAckResponse>, Status> {
        let (seat, _) = self.native_seat(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        let delivery_id = req.delivery_id;
        let mut book = self.inner.book.lock().await;
        let recorded = book
            .ack(&seat, &delivery_id, &req.claim_id, now_ms())
            .ok_or_else(|| {
                refuse(
                    ErrorCode::ReceiptNotFound
                        .err("no such delivery under this claim for this seat"),
                )
            })?;
        if recorded {
            self.save_book(&book).map_err(refuse)?;
            tracing::info!(delivery = %delivery_id, "mailbox.delivery.acknowledged");
        }
        Ok(Response::new(pb::SeatAckResponse { recorded }))
    }

    async fn list_peers(
        &self,
        request: Request<pb::ListPeersRequest>,
    ) -> Result<Response<pb::ListPeersResponse>, Status> {
        let (me, settings) = self.native_seat(&request).await.map_err(refuse)?;
        if !settings.peer_messages {
            return Err(refuse(peers_off(&settings)));
        }
        self.sweep_gone().await.map_err(refuse)?;
        let hires = self.inner.store.lock().await.state.hires.clone();
        let book = self.inner.book.lock().await;
        let seats = book
            .seats
            .iter()
            .filter(|s| !s.gone && s.fleet == me.fleet && s.seat_id != me.seat_id)
            .map(|s| self.seat_pb(s, &hires))
            .collect();
        Ok(Response::new(pb::ListPeersResponse {
            self_: Some(self.seat_pb(&me, &hires)),
            seats,
        }))
    }

    async fn send_peer(
        &self,
        request: Request<pb::SendPeerRequest>,
    ) -> Result<Response<pb::PeerReceipt>, Status> {
        let (me, settings) = self.native_seat(&request).await.map_err(refuse)?;
        // Off refuses every new send, stale catalogs included.
        if !settings.peer_messages {
            return Err(refuse(peers_off(&settings)));
        }
        let req = request.into_inner();
        if req.text.trim().is_empty() || req.text.len() > MAX_REPORT {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("a message is 1 byte to 32 KiB of text"),
            ));
        }
        if req.receipt_id.is_empty() || req.receipt_id.len() > 128 {
            return Err(refuse(
                ErrorCode::InvalidArgument
                    .err("a peer message needs a receipt id (at most 128 bytes)"),
            ));
        }
        // No pane sweep here: a closed recipient stops polling and loses its
        // live route; a closed hire marks its seats gone at once; receipt
        // reads reconcile the rest.
        let mut book = self.inner.book.lock().await;
        let recipient = book
            .seat(&req.seat)
            .filter(|r| !r.gone && r.fleet == me.fleet && r.seat_id != me.seat_id)
            .cloned();
        // An earlier send under this receipt id answers even if the
        // recipient has gone since.
        if let Some(m) = book
            .peer_messages
            .iter()
            .find(|m| m.receipt_id == req.receipt_id && m.sender_seat == me.seat_id)
        {
            return Ok(Response::new(receipt_pb(m, true)));
        }
        let Some(recipient) = recipient else {
            return Err(refuse(
                ErrorCode::RecipientUnknown
                    .err("no such current seat in this fleet; list the seats again"),
            ));
        };
        if !self.reachable(&recipient.seat_id) {
            return Err(refuse(
                ErrorCode::RecipientUnknown.err("that seat has no live delivery route right now"),
            ));
        }
        let now = now_ms();
        let outcome = book.send(
            &me,
            &recipient,
            &req.receipt_id,
            &req.text,
            short_id("pm"),
            short_id("dlv"),
            now,
        );
        let (index, original) = match outcome {
            seats::SendOutcome::Original(i) => (i, true),
            seats::SendOutcome::Sent(i) => (i, false),
        };
        let receipt = receipt_pb(&book.peer_messages[index], original);
        self.save_book(&book).map_err(refuse)?;
        drop(book);
        if !original {
            self.inner.queued.send_modify(|n| *n += 1);
            self.audit(&json!({
                "event": "peer_message.sent",
                "atMs": now,
                "peerMessageId": receipt.peer_message_id,
                "receiptId": receipt.receipt_id,
                "fleet": me.fleet,
                "sender": me.seat_id,
                "senderPane": me.pane_id,
                "recipient": recipient.seat_id,
                "follows": receipt.follows,
            }));
            tracing::info!(
                message = %receipt.peer_message_id,
                sender = %me.seat_id,
                recipient = %recipient.seat_id,
                "mailbox.peer_message.sent"
            );
            // The sender's lead (its hiring conversation, or the global head)
            // records it as agent output with source `peer`; no one is woken.
            let mut store = self.inner.store.lock().await;
            let conversation = store
                .state
                .hires
                .iter()
                .find(|h| h.ended.is_empty() && h.link_id == me.link_id && h.pane_id == me.pane_id)
                .map(|h| h.conversation_id.clone())
                .filter(|c| present(&store.state, c))
                .unwrap_or_else(|| HEAD.to_string());
            let entry = EntryRec {
                seq: 0,
                kind: "peer".into(),
                role: "agent".into(),
                text: format!(
                    "[peer message {} from seat {} to seat {}] {}",
                    receipt.peer_message_id, me.seat_id, recipient.seat_id, req.text
                ),
                source: "peer".into(),
                untrusted: true,
                at_ms: now,
                receipt_id: String::new(),
                hire_id: String::new(),
            };
            if let Err(e) = store.append(&conversation, entry) {
                tracing::error!(error = %e, "peer message not written to the transcript");
            }
            drop(store);
            self.inner.appended.send_modify(|n| *n += 1);
        }
        Ok(Response::new(receipt))
    }

    async fn get_peer_receipt(
        &self,
        request: Request<pb::GetPeerReceiptRequest>,
    ) -> Result<Response<pb::PeerReceipt>, Status> {
        // Reads stay allowed with peer messages off.
        let (me, _) = self.native_seat(&request).await.map_err(refuse)?;
        let id = request.into_inner().peer_message_id;
        self.sweep_gone().await.map_err(refuse)?;
        let book = self.inner.book.lock().await;
        let m = book
            .peer_messages
            .iter()
            .find(|m| m.id == id && m.sender_seat == me.seat_id)
            .ok_or_else(|| {
                refuse(ErrorCode::ReceiptNotFound.err("no such peer message of yours"))
            })?;
        Ok(Response::new(receipt_pb(m, true)))
    }
    async fn seat_tools(
        &self,
        request: Request<pb::SeatToolsRequest>,
    ) -> Result<Response<pb::SeatToolsResponse>, Status> {
        let principal = self.pane_principal(&request).await.map_err(refuse)?;
        let store = self.inner.store.lock().await;
        let reviews = store
            .state
            .hires
            .iter()
            .find(|h| {
                h.ended.is_empty()
                    && h.link_id == principal.link_id
                    && h.pane_id == principal.pane_id
            })
            .and_then(|h| {
                store
                    .state
                    .projects
                    .iter()
                    .find(|p| p.project_id == h.project_id)
            })
            .is_some_and(|p| p.standing_reviewer);
        let lead = store.state.hires.iter().any(|h| {
            h.ended.is_empty()
                && h.role == "lead"
                && h.link_id == principal.link_id
                && h.pane_id == principal.pane_id
        });
        Ok(Response::new(pb::SeatToolsResponse { reviews, lead }))
    }

    async fn submit_review(
        &self,
        request: Request<pb::SubmitReviewRequest>,
    ) -> Result<Response<pb::ReviewCandidate>, Status> {
        let (me, _) = self.native_seat(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        let bad = |m: &str| refuse(ErrorCode::InvalidArgument.err(m.to_string()));
        if !req.checkout.starts_with('/') {
            return Err(bad("the checkout must be an absolute path"));
        }
        if !reviews::is_object_name(&req.head)
            || !reviews::is_object_name(&req.base)
            || !reviews::is_object_name(&req.patch_id)
        {
            return Err(bad("head, base and patch-id must be full hex object names"));
        }
        if req.patch.is_empty() || req.summary.trim().is_empty() {
            return Err(bad("a candidate needs a non-empty patch and a summary"));
        }
        if req.patch.len() > clankie_runtime::limits::MAX_CANDIDATE_PATCH {
            return Err(refuse(ErrorCode::PayloadTooLarge.err(format!(
                "a review candidate holds at most {} MiB of patch; nothing was stored",
                clankie_runtime::limits::MAX_CANDIDATE_PATCH >> 20
            ))));
        }
        // What the reviewer will read is what the patch-id names: the
        // service computes it from the bytes it stores, never takes it.
        let computed = reviews::patch_id(&req.patch, &self.inner.patches_dir)
            .await
            .map_err(refuse)?;
        if computed != req.patch_id {
            return Err(refuse(ErrorCode::PatchMismatch.err(
                "the patch-id does not match the patch bytes; nothing was stored",
            )));
        }
        let hire = self.hire_of(&me).await.ok_or_else(|| {
            refuse(
                ErrorCode::ReviewNotConfigured
                    .err("only a hired seat of a project can submit for review"),
            )
        })?;
        let project = {
            let store = self.inner.store.lock().await;
            store
                .state
                .projects
                .iter()
                .find(|p| p.project_id == hire.project_id)
                .cloned()
        };
        let Some(project) = project.filter(|p| p.standing_reviewer) else {
            return Err(refuse(
                ErrorCode::ReviewNotConfigured
                    .err("this seat's project names no standing reviewer"),
            ));
        };
        // The checkout, symlinks resolved, lies in one of the project's
        // registered workspaces.
        let checkout =
            reviews::inside_workspaces(&req.checkout, &project.workspaces).map_err(refuse)?;
        // A live reviewer seat of the project, other than the author.
        let reviewer_hires: Vec<HireRec> = {
            let store = self.inner.store.lock().await;
            store
                .state
                .hires
                .iter()
                .filter(|h| {
                    h.ended.is_empty() && h.project_id == hire.project_id && h.role == "reviewer"
                })
                .cloned()
                .collect()
        };
        let reviewer = {
            let book = self.inner.book.lock().await;
            book.seats
                .iter()
                .filter(|s| !s.gone && s.seat_id != me.seat_id)
                .filter(|s| {
                    reviewer_hires
                        .iter()
                        .any(|h| h.link_id == s.link_id && h.pane_id == s.pane_id)
                })
                .find(|s| self.reachable(&s.seat_id))
                .cloned()
        };
        let Some(reviewer) = reviewer else {
            return Err(refuse(ErrorCode::NoReviewer.err(
                "no live reviewer seat other than the author; nothing was stored",
            )));
        };
        if self.inner.reviews.lock().await.pending_of(&me.seat_id) >= reviews::MAX_PENDING_PER_SEAT
        {
            return Err(refuse(ErrorCode::ReviewQuota.err(format!(
                "this seat already has {} candidates waiting for a verdict; nothing was stored",
                reviews::MAX_PENDING_PER_SEAT
            ))));
        }
        let sha = reviews::sha256_hex(&req.patch);
        let patch_path = self.inner.patches_dir.join(format!("{sha}.patch"));
        if !patch_path.exists() {
            clankie_runtime::state::atomic_write(&patch_path, &req.patch)
                .map_err(|e| refuse(internal(e)))?;
        }
        let mut book = self.inner.reviews.lock().await;
        let candidate = reviews::CandidateRec {
            candidate_id: short_id("cand"),
            project_id: hire.project_id.clone(),
            author_seat: me.seat_id.clone(),
            author_hire: hire.hire_id.clone(),
            reviewer_seat: reviewer.seat_id.clone(),
            checkout,
            head: req.head,
            base: req.base,
            patch_id: req.patch_id,
            patch_sha256: sha,
            summary: req.summary.chars().take(4000).collect(),
            issue: req.issue.chars().take(200).collect(),
            evidence: req.evidence.chars().take(8000).collect(),
            state: "pending".into(),
            findings: Vec::new(),
            verdict_summary: String::new(),
            previous: book.previous_for(&hire.project_id, &req.issue),
            created_at_ms: now_ms(),
            decided_at_ms: 0,
        };
        book.candidates.push(candidate.clone());
        self.save_reviews(&book).map_err(refuse)?;
        drop(book);
        let text = format!(
            "Review candidate {} from seat {}: {} (issue {}, HEAD {}, patch-id {}). Read it with review_candidate, decide with review_verdict.",
            candidate.candidate_id,
            me.seat_id,
            candidate.summary,
            if candidate.issue.is_empty() {
                "none"
            } else {
                &candidate.issue
            },
            candidate.head,
            candidate.patch_id
        );
        self.deliver(&reviewer, "review", format!("seat:{}", me.seat_id), text)
            .await
            .map_err(refuse)?;
        tracing::info!(candidate = %candidate.candidate_id, "mailbox.review.submitted");
        Ok(Response::new(candidate_pb(&candidate, Vec::new())))
    }

    async fn get_review_candidate(
        &self,
        request: Request<pb::GetReviewCandidateRequest>,
    ) -> Result<Response<pb::ReviewCandidate>, Status> {
        let (me, _) = self.native_seat(&request).await.map_err(refuse)?;
        let id = request.into_inner().candidate_id;
        let c = self
            .inner
            .reviews
            .lock()
            .await
            .get(&id)
            .cloned()
            .ok_or_else(|| {
                refuse(ErrorCode::CandidateNotFound.err(format!("no candidate {id}")))
            })?;
        if c.author_seat != me.seat_id && !self.is_reviewer(&me, &c.project_id).await {
            return Err(refuse(ErrorCode::NotReviewer.err(
                "only the author and the project's reviewer read a candidate",
            )));
        }
        Ok(Response::new(candidate_pb(
            &c,
            self.read_patch(&c.patch_sha256),
        )))
    }

    async fn review_verdict(
        &self,
        request: Request<pb::ReviewVerdictRequest>,
    ) -> Result<Response<pb::ReviewCandidate>, Status> {
        let (me, _) = self.native_seat(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        let mut book = self.inner.reviews.lock().await;
        let index = book
            .candidates
            .iter()
            .position(|c| c.candidate_id == req.candidate_id)
            .ok_or_else(|| {
                refuse(
                    ErrorCode::CandidateNotFound.err(format!("no candidate {}", req.candidate_id)),
                )
            })?;
        let candidate = book.candidates[index].clone();
        if candidate.author_seat == me.seat_id {
            return Err(refuse(
                ErrorCode::NotReviewer.err("the author cannot decide its own candidate"),
            ));
        }
        if !self.is_reviewer(&me, &candidate.project_id).await {
            return Err(refuse(
                ErrorCode::NotReviewer.err("only the project's reviewer decides a candidate"),
            ));
        }
        let findings: Vec<reviews::FindingRec> = req
            .findings
            .iter()
            .map(|f| reviews::FindingRec {
                text: f.text.clone(),
                file: f.file.clone(),
                line: f.line,
            })
            .collect();
        reviews::check_verdict(&candidate, &req.patch_id, &req.verdict, &findings)
            .map_err(|(code, m)| refuse(code.err(m)))?;
        let c = &mut book.candidates[index];
        c.state = if req.verdict == "approve" {
            "approved"
        } else {
            "changes"
        }
        .into();
        c.findings = findings;
        c.verdict_summary = req.summary.chars().take(4000).collect();
        c.decided_at_ms = now_ms();
        let decided = c.clone();
        self.save_reviews(&book).map_err(refuse)?;
        drop(book);
        // The author hears the verdict on its seat.
        let author = self
            .inner
            .book
            .lock()
            .await
            .seat(&decided.author_seat)
            .cloned();
        if let Some(author) = author.filter(|a| !a.gone) {
            let text = format!(
                "Review of {}: {}{}",
                decided.candidate_id,
                decided.state,
                if decided.verdict_summary.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", decided.verdict_summary)
                }
            );
            if let Err(e) = self
                .deliver(&author, "review", format!("seat:{}", me.seat_id), text)
                .await
            {
                tracing::warn!(error = %e, "verdict not queued for the author");
            }
        }
        Ok(Response::new(candidate_pb(&decided, Vec::new())))
    }

    async fn list_reviews(
        &self,
        request: Request<pb::ListReviewsRequest>,
    ) -> Result<Response<pb::ListReviewsResponse>, Status> {
        self.owner(&request)?;
        let id = request.into_inner().candidate_id;
        let book = self.inner.reviews.lock().await;
        let candidates = book
            .candidates
            .iter()
            .filter(|c| id.is_empty() || c.candidate_id == id)
            .map(|c| {
                let patch = if id.is_empty() {
                    Vec::new()
                } else {
                    self.read_patch(&c.patch_sha256)
                };
                candidate_pb(c, patch)
            })
            .collect();
        Ok(Response::new(pb::ListReviewsResponse { candidates }))
    }
    async fn seat_claim(
        &self,
        request: Request<pb::SeatClaimRequest>,
    ) -> Result<Response<pb::SeatClaimResponse>, Status> {
        let (seat, _) = self.native_seat(&request).await.map_err(refuse)?;
        let ids = request.into_inner().delivery_ids;
        let claim_id = short_id("claim");
        let mut book = self.inner.book.lock().await;
        let held = book.claim(&seat, &ids, &claim_id, now_ms());
        if !held.is_empty() {
            // The claim is durable before the bridge hears of it.
            self.save_book(&book).map_err(refuse)?;
        }
        Ok(Response::new(pb::SeatClaimResponse {
            claim_id,
            deliveries: held.into_iter().map(delivery_pb).collect(),
        }))
    }

    async fn seat_release(
        &self,
        request: Request<pb::SeatReleaseRequest>,
    ) -> Result<Response<pb::SeatAckResponse>, Status> {
        let (seat, _) = self.native_seat(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        let mut book = self.inner.book.lock().await;
        let released = book.release(&seat, &req.delivery_id, &req.claim_id);
        if released {
            self.save_book(&book).map_err(refuse)?;
            drop(book);
            self.inner.queued.send_modify(|n| *n += 1);
        }
        Ok(Response::new(pb::SeatAckResponse { recorded: released }))
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
