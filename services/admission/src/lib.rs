//! The admission service.
//!
//! Owns: fleet links (local tmux and Herdr sessions, and remote bearer
//! links, of which only a token's SHA-256 is stored), per-request admission
//! tickets, the local pane proof from kernel facts (`local/`: the socket's
//! owner and its lineage up to the pane, the seat's foreground agent, the
//! exact Claude launcher's chain), and the owner's fleet settings
//! (`fleet.tools: connected | off`, peer messages). Every fleet request is
//! admitted here by one gRPC call, and every dispatch rechecks its ticket
//! here immediately before effects: admission first, then the switch.
//!
//! Does not own: tool dispatch, accounts or receipts (mcp-host), seats and
//! hires (mailbox), reading the kernel (the census helper, a separate
//! process, through `helper.rs`).
//!
//! Fail-safe: an unreadable links file admits nobody; an unreadable settings
//! file reads as `tools: off`. Neither file is overwritten while unreadable.

mod grpc;
pub mod helper;
pub mod local;
mod machine_links;
mod machines;
mod metrics;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::common::v1::{AdmissionMode, FleetTools, Principal};
use clankie_runtime::listener;
use clankie_runtime::owner::{self, OwnerCheck};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::state::{self, GuardError, Guarded};
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use clankie_types::LinkKind;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// How long a ticket stays valid: longer than the 30 s request budget.
pub const TICKET_TTL: Duration = Duration::from_secs(60);

/// Fleet names: lowercase letters, digits and dashes, 1..=40 long.
pub fn valid_fleet_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

pub(crate) fn check_fleet_name(name: &str) -> Result<(), ClankieError> {
    if valid_fleet_name(name) {
        Ok(())
    } else {
        Err(ErrorCode::InvalidArgument
            .err("fleet names use lowercase letters, digits and dashes (at most 40)"))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LinkRecord {
    link_id: String,
    fleet: String,
    kind: LinkKind,
    #[serde(default)]
    label: String,
    /// Bearer links only.
    #[serde(default)]
    token_sha256: String,
    created_at_ms: i64,
    /// Local links: the multiplexer's socket and (tmux) session.
    #[serde(default)]
    socket: String,
    #[serde(default)]
    session: String,
    /// Bearer links: when the token stops admitting (0: until revoked).
    #[serde(default, skip_serializing_if = "is_zero")]
    expires_at_ms: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl LinkRecord {
    /// A bearer link past its expiry admits nothing.
    fn expired(&self, now_ms: i64) -> bool {
        self.expires_at_ms != 0 && now_ms >= self.expires_at_ms
    }

    fn local(&self) -> Option<local::LocalLink> {
        let host = match self.kind {
            LinkKind::Tmux => local::Host::Tmux(clankie_panes::Tmux::new(
                self.socket.clone(),
                (!self.session.is_empty()).then(|| self.session.clone()),
            )),
            LinkKind::Herdr => local::Host::Herdr(clankie_panes::Herdr::new(self.socket.clone())),
            LinkKind::Bearer => return None,
        };
        Some(local::LocalLink {
            link_id: self.link_id.clone(),
            fleet: self.fleet.clone(),
            host,
        })
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct LinksFile {
    version: u32,
    links: Vec<LinkRecord>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ToolsSetting {
    Connected,
    Off,
}

fn on() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SettingsFile {
    tools: ToolsSetting,
    revision: u64,
    #[serde(default = "on")]
    peer_messages: bool,
    #[serde(default)]
    worker_sandbox: bool,
}

/// The owner's fleet settings. An unreadable file reads as off (and the
/// sandbox on), and is never saved over except by the owner's deliberate
/// change, which keeps it aside.
#[derive(Debug, Clone)]
struct Settings(Guarded<SettingsFile>);

impl Settings {
    fn file(&self) -> &SettingsFile {
        self.0.value()
    }

    fn unreadable(&self) -> bool {
        self.0.unreadable().is_some()
    }

    fn to_pb(&self) -> admission_pb::FleetSettings {
        let unreadable = self.unreadable();
        let file = self.file();
        let tools = if unreadable || file.tools == ToolsSetting::Off {
            FleetTools::Off
        } else {
            FleetTools::Connected
        };
        admission_pb::FleetSettings {
            tools: tools as i32,
            revision: file.revision,
            peer_messages: !unreadable && file.peer_messages,
            // Unreadable settings confine hires: the safe side of the switch.
            worker_sandbox: unreadable || file.worker_sandbox,
            unreadable,
        }
    }
}

struct Ticket {
    link_id: String,
    principal: Principal,
    expires: Instant,
    /// When the last observation that held this ticket's local proof began
    /// (`CLOCK_MONOTONIC` nanoseconds): every fact it compared was read
    /// after it. None when the clock could not be read.
    verified_ns: Option<u64>,
    /// Set for local proofs: what the cheap recheck compares against.
    local: Option<(local::LocalLink, local::Proof)>,
    /// Set for relayed requests: the machine and the hold of the link it
    /// came on. The ticket lives only while that very link is up.
    relay: Option<(String, u64)>,
}

/// A local proof's ticket lives while its connection is used: each
/// successful recheck extends it by this much (the idle connection limit).
pub const LOCAL_TICKET_IDLE: Duration = Duration::from_secs(600);

/// Options for the admission service.
pub struct Options {
    paths: StatePaths,
    /// The census helper's command (default: `clankie-helper` beside this
    /// executable, or `$CLANKIE_HELPER_BIN`).
    pub helper: Vec<String>,
}

/// The default helper command.
pub fn default_helper() -> Vec<String> {
    if let Some(bin) = std::env::var_os("CLANKIE_HELPER_BIN") {
        return vec![bin.to_string_lossy().to_string()];
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("clankie-helper")))
        .unwrap_or_else(|| "clankie-helper".into());
    vec![beside.to_string_lossy().to_string()]
}

impl Options {
    pub fn new(paths: StatePaths) -> Self {
        Options {
            paths,
            helper: default_helper(),
        }
    }

    /// Loads state and the owner credential; the helper starts on first use
    /// and is closed at `shutdown`.
    pub async fn build(
        self,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> anyhow::Result<AdmissionService> {
        let dir = self.paths.service_dir("admission");
        state::private_dir(&dir)?;
        let owner = OwnerCheck::load(&self.paths.owner_credential())?;
        let links = Guarded::load(
            dir.join("links.json"),
            LinksFile::default,
            LinksFile::default,
        );
        if let Some(e) = links.unreadable() {
            tracing::error!(error = %e, "fleet links unreadable; admitting no bearer links");
        }
        let machines = machines::load(dir.join("machines.json"));
        let settings = Settings(Guarded::load(
            dir.join("settings.json"),
            || SettingsFile {
                tools: ToolsSetting::Connected,
                revision: 1,
                peer_messages: true,
                worker_sandbox: false,
            },
            || SettingsFile {
                tools: ToolsSetting::Off,
                revision: 0,
                peer_messages: false,
                worker_sandbox: true,
            },
        ));
        if let Some(e) = settings.0.unreadable() {
            tracing::error!(error = %e, "fleet settings unreadable; fleet.tools reads as off");
        }
        let (settings_tx, _) = watch::channel(settings);
        let helper = helper::HelperClient::start(self.helper, shutdown);
        let machine_links = Arc::new(machine_links::MachineLinks::default());
        Ok(AdmissionService {
            inner: Arc::new(Inner {
                stats: Mutex::new(LocalStats::default()),
                _queue_gauge: metrics::helper_queue(helper.clone()),
                helper,
                hosts: Mutex::new(HashMap::new()),
                owner,
                links: Mutex::new(links),
                machines: Mutex::new(machines),
                _links_gauge: metrics::links_up(machine_links.clone()),
                machine_links,
                settings: settings_tx,
                tickets: Mutex::new(HashMap::new()),
                relay_tickets: Mutex::new(HashMap::new()),
            }),
        })
    }
}

/// Local proof counters since start.
#[derive(Default)]
struct LocalStats {
    proofs: u64,
    reuses: u64,
    refusals: std::collections::BTreeMap<&'static str, u64>,
    /// When the last proof succeeded (0: none yet).
    last_proof_at_ms: i64,
}

struct Inner {
    stats: Mutex<LocalStats>,
    /// Kept so the helper's queue depth is read at each collection.
    _queue_gauge: opentelemetry::metrics::ObservableGauge<u64>,
    helper: helper::HelperClient,
    /// Pane hosts by link id, kept so their connections (tmux control
    /// clients) live across proofs.
    hosts: Mutex<HashMap<String, local::LocalLink>>,
    owner: OwnerCheck,
    links: Mutex<Guarded<LinksFile>>,
    /// Remote machines of the fleets (`machines.rs`).
    machines: Mutex<Guarded<machines::MachinesFile>>,
    /// Which machines have their relay stream up (`machine_links.rs`).
    machine_links: Arc<machine_links::MachineLinks>,
    /// Kept so the links gauge is read at each collection.
    _links_gauge: opentelemetry::metrics::ObservableGauge<u64>,
    settings: watch::Sender<Settings>,
    tickets: Mutex<HashMap<String, Ticket>>,
    /// The live ticket of each (machine, link, pane), reused while it lives.
    relay_tickets: Mutex<HashMap<(String, u64, String), String>>,
}

/// The admission service; cheap to clone.
#[derive(Clone)]
pub struct AdmissionService {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}

impl AdmissionService {
    /// The tonic routes for this service.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(admission_pb::admission_server::AdmissionServer::new(
            self.clone(),
        ))
    }

    /// Ready while the links and settings files are readable.
    pub fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        let inner = self.inner.clone();
        clankie_runtime::readiness::Readiness::check(move || {
            if lock(&inner.links).unreadable().is_some() {
                return Some("fleet links file unreadable".into());
            }
            inner
                .settings
                .borrow()
                .unreadable()
                .then(|| "fleet settings file unreadable".into())
        })
    }

    fn admit_bearer(&self, bearer: &str) -> Result<(String, Principal), ClankieError> {
        if bearer.is_empty() {
            return Err(ErrorCode::FleetCredentialRequired
                .err("a fleet bearer token is required (CLANKIE_FLEET_TOKEN)"));
        }
        let hash = owner::token_hash(bearer);
        let links = lock(&self.inner.links);
        if links.unreadable().is_some() {
            return Err(ErrorCode::FleetAdmissionUnavailable
                .err("fleet links cannot be read; ask the owner to inspect admission"));
        }
        let link = links
            .links
            .iter()
            .filter(|l| l.kind == LinkKind::Bearer)
            .find(|l| owner::constant_time_eq(l.token_sha256.as_bytes(), hash.as_bytes()))
            .ok_or_else(|| {
                ErrorCode::FleetCredentialInvalid
                    .err("this fleet token is not linked; ask the lead for admission")
            })?;
        if link.expired(now_ms()) {
            return Err(ErrorCode::FleetCredentialInvalid
                .err("this fleet token has expired; ask the owner for a new one"));
        }
        Ok((
            link.link_id.clone(),
            Principal {
                fleet_id: link.fleet.clone(),
                pane_id: String::new(),
                mode: AdmissionMode::Bearer as i32,
                link_id: link.link_id.clone(),
                machine: String::new(),
            },
        ))
    }

    fn issue_ticket(
        &self,
        link_id: String,
        principal: Principal,
        local: Option<(local::LocalLink, local::Proof)>,
    ) -> String {
        let ticket = owner::random_token("tkt");
        let now = Instant::now();
        let mut tickets = lock(&self.inner.tickets);
        if tickets.len() > 4096 {
            tickets.retain(|_, t| t.expires > now);
        }
        let ttl = if local.is_some() {
            LOCAL_TICKET_IDLE
        } else {
            TICKET_TTL
        };
        tickets.insert(
            ticket.clone(),
            Ticket {
                link_id,
                principal,
                expires: now + ttl,
                verified_ns: clankie_runtime::clock::monotonic_ns(),
                local,
                relay: None,
            },
        );
        ticket
    }

    /// A ticket for a request machine `machine` relayed on its link
    /// `holder` for its pane `principal.pane_id`: the same one again while
    /// it lives (a busy machine does not fill the ticket map), a new one
    /// after.
    fn issue_relay_ticket(&self, machine: &str, holder: u64, principal: Principal) -> String {
        let key = (machine.to_string(), holder, principal.pane_id.clone());
        let now = Instant::now();
        if let Some(t) = lock(&self.inner.relay_tickets).get(&key)
            && lock(&self.inner.tickets)
                .get(t)
                .is_some_and(|t| t.expires > now + TICKET_TTL / 2)
        {
            return t.clone();
        }
        let ticket = self.issue_ticket(principal.link_id.clone(), principal, None);
        if let Some(t) = lock(&self.inner.tickets).get_mut(&ticket) {
            t.relay = Some((machine.to_string(), holder));
        }
        let mut reused = lock(&self.inner.relay_tickets);
        if reused.len() > 4096 {
            let tickets = lock(&self.inner.tickets);
            reused.retain(|_, t| tickets.get(t).is_some_and(|t| t.expires > now));
        }
        reused.insert(key, ticket.clone());
        ticket
    }

    /// Rechecks a ticket: a local proof is observed again (`observe`), and
    /// its link must stand. Without `observe`, only the ticket and its link
    /// are looked up (`TicketPrincipal`).
    async fn recheck(
        &self,
        ticket: &str,
        observe: bool,
    ) -> Result<(Principal, admission_pb::FleetSettings), ClankieError> {
        let (link_id, principal, local, relay) = {
            let tickets = lock(&self.inner.tickets);
            let t = tickets.get(ticket).ok_or_else(|| {
                ErrorCode::FleetCredentialRequired
                    .err("the request carries no valid admission ticket")
            })?;
            if t.expires <= Instant::now() {
                return Err(ErrorCode::FleetCredentialRequired.err("the admission ticket expired"));
            }
            (
                t.link_id.clone(),
                t.principal.clone(),
                t.local.clone(),
                t.relay.clone(),
            )
        };
        // A relayed request's admission lives with its machine's link.
        if let Some((machine, holder)) = relay {
            if !self.inner.machine_links.current(&machine, holder) {
                lock(&self.inner.tickets).remove(ticket);
                return Err(ErrorCode::FleetAdmissionRevoked
                    .err("this machine's relay link ended; its requests are no longer admitted"));
            }
            let settings = self.inner.settings.borrow().to_pb();
            return Ok((principal, settings));
        }
        // A local proof is rechecked cheaply; a failure discards it.
        if let Some((link, proof)) = local.as_ref().filter(|_| observe) {
            let began = clankie_runtime::clock::monotonic_ns();
            if let Err(r) = local::recheck(&self.inner.helper, link, proof).await {
                lock(&self.inner.tickets).remove(ticket);
                self.count_refusal(r.reason);
                return Err(r.error);
            }
            self.rechecked(ticket, began);
        }
        // Admission first: the link must still exist.
        {
            let links = lock(&self.inner.links);
            if links.unreadable().is_some() {
                return Err(ErrorCode::FleetAdmissionUnavailable.err("fleet links cannot be read"));
            }
            match links.links.iter().find(|l| l.link_id == link_id) {
                None => {
                    return Err(ErrorCode::FleetAdmissionRevoked.err("this fleet link was removed"));
                }
                Some(l) if l.expired(now_ms()) => {
                    return Err(
                        ErrorCode::FleetAdmissionRevoked.err("this fleet token has expired")
                    );
                }
                Some(_) => {}
            }
        }
        // Then the switch.
        let settings = self.inner.settings.borrow().to_pb();
        Ok((principal, settings))
    }
}

impl AdmissionService {
    /// Counts a passed recheck of a ticket's local proof, begun at `began`,
    /// and keeps the ticket alive for another idle period.
    fn rechecked(&self, ticket: &str, began: Option<u64>) {
        lock(&self.inner.stats).reuses += 1;
        metrics::reused();
        if let Some(t) = lock(&self.inner.tickets).get_mut(ticket) {
            t.expires = Instant::now() + LOCAL_TICKET_IDLE;
            if began.is_some() {
                t.verified_ns = t.verified_ns.max(began);
            }
        }
    }

    /// Whether a local ticket's proof held in an observation begun at or
    /// after `since` (`CLOCK_MONOTONIC` nanoseconds). False for other
    /// tickets and whenever either time is unknown.
    fn held_since(&self, ticket: &str, since: Option<u64>) -> bool {
        let tickets = lock(&self.inner.tickets);
        let verified = tickets
            .get(ticket)
            .filter(|t| t.local.is_some())
            .and_then(|t| t.verified_ns);
        matches!((verified, since), (Some(v), Some(s)) if v >= s)
    }
}

/// Why the links file was not saved: never over an unreadable one.
fn save_refusal(e: GuardError) -> Status {
    refused(match e {
        GuardError::Unreadable => ErrorCode::FleetAdmissionUnavailable
            .err("fleet links cannot be read; not overwriting them"),
        GuardError::Write(e) => ErrorCode::Internal.err(format!("could not save fleet links: {e}")),
    })
}

/// A refusal the local proof already logged, with its reason and stage.
#[allow(
    clippy::disallowed_methods,
    reason = "local/ logs each refusal once, with its stage"
)]
fn already_logged(e: ClankieError) -> Status {
    e.into_status()
}

use clankie_runtime::refuse::admission as refused;
use tokio_stream::StreamExt as _;

impl AdmissionService {
    /// The links a local proof may use, with their cached pane hosts.
    fn local_links(&self) -> Result<Vec<local::LocalLink>, Status> {
        let links = lock(&self.inner.links);
        if links.unreadable().is_some() {
            return Err(refused(
                ErrorCode::FleetAdmissionUnavailable.err("fleet links cannot be read"),
            ));
        }
        let mut hosts = lock(&self.inner.hosts);
        hosts.retain(|id, _| links.links.iter().any(|l| &l.link_id == id));
        Ok(links
            .links
            .iter()
            .filter_map(|l| {
                if let Some(h) = hosts.get(&l.link_id) {
                    return Some(h.clone());
                }
                let h = l.local()?;
                hosts.insert(l.link_id.clone(), h.clone());
                Some(h)
            })
            .collect())
    }

    /// Runs the full local proof and counts it.
    async fn prove_peer(
        &self,
        peer: &local::Peer,
    ) -> Result<(local::LocalLink, local::Proof), Status> {
        let links = self.local_links()?;
        // Refusals are logged inside the proof with their reason and stage.
        let proof = local::prove(&self.inner.helper, &links, peer)
            .await
            .map_err(|r| {
                self.count_refusal(r.reason);
                already_logged(r.error)
            })?;
        {
            let mut stats = lock(&self.inner.stats);
            stats.proofs += 1;
            stats.last_proof_at_ms = clankie_runtime::now_ms();
        }
        metrics::proved("local");
        let link = links
            .into_iter()
            .find(|l| l.link_id == proof.link_id)
            .ok_or_else(|| refused(ErrorCode::Internal.err("the proving link vanished")))?;
        Ok((link, proof))
    }

    fn count_refusal(&self, reason: &'static str) {
        *lock(&self.inner.stats).refusals.entry(reason).or_default() += 1;
        metrics::refused("local", reason);
    }

    fn add_link(&self, guard: &mut Guarded<LinksFile>, record: LinkRecord) -> Result<(), Status> {
        guard
            .update(|next| {
                next.version = 1;
                next.links.push(record);
            })
            .map_err(save_refusal)?;
        Ok(())
    }

    fn status(&self) -> admission_pb::FleetStatusResponse {
        let settings = self.inner.settings.borrow().to_pb();
        let links = lock(&self.inner.links).links.iter().map(link_pb).collect();
        let mut problems = Vec::new();
        if lock(&self.inner.links).unreadable().is_some() {
            problems.push(
                "the links file (admission/links.json) is unreadable: no bearer link is admitted until it is repaired"
                    .to_string(),
            );
        }
        if lock(&self.inner.machines).unreadable().is_some() {
            problems.push(
                "the machines file (admission/machines.json) is unreadable: no remote machine is listed or admitted until it is repaired"
                    .to_string(),
            );
        }
        if self.inner.settings.borrow().unreadable() {
            problems.push(
                "the settings file (admission/settings.json) is unreadable: fleet.tools reads as off"
                    .to_string(),
            );
        }
        let mut machines = machines::list(&lock(&self.inner.machines)).machines;
        for m in &mut machines {
            self.inner.machine_links.fill(m);
        }
        let stats = lock(&self.inner.stats);
        admission_pb::FleetStatusResponse {
            settings: Some(settings),
            links,
            problems,
            machines,
            local_proofs: Some(admission_pb::LocalProofStats {
                proofs: stats.proofs,
                reuses: stats.reuses,
                refusals: stats
                    .refusals
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect(),
                helper_queue_depth: u32::try_from(self.inner.helper.depth()).unwrap_or(u32::MAX),
                last_proof_at_ms: stats.last_proof_at_ms,
                helper_exchanges: self.inner.helper.exchanges(),
                pane_reads: local::pane_counters().0,
                pane_map_hits: local::pane_counters().1,
            }),
        }
    }
}

fn link_pb(l: &LinkRecord) -> admission_pb::FleetLink {
    admission_pb::FleetLink {
        link_id: l.link_id.clone(),
        fleet: l.fleet.clone(),
        kind: l.kind.wire(),
        label: l.label.clone(),
        created_at_ms: l.created_at_ms,
        socket: l.socket.clone(),
        session: l.session.clone(),
        expires_at_ms: l.expires_at_ms,
    }
}

impl clankie_runtime::main_kit::Served for AdmissionService {
    fn routes(&self) -> tonic::service::Routes {
        AdmissionService::routes(self)
    }

    fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        AdmissionService::readiness(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn service() -> (tempfile::TempDir, AdmissionService) {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = StatePaths::new(dir.path());
        owner::ensure_owner_token(&paths.owner_credential()).expect("owner");
        let svc = Options::new(paths)
            .build(tokio_util::sync::CancellationToken::new())
            .await
            .expect("build");
        (dir, svc)
    }

    /// A links file written when the kind was a bare string still loads,
    /// and writes the same strings back.
    #[test]
    fn a_links_file_written_before_the_kind_enum_still_loads() {
        let old = serde_json::json!({"version": 1, "links": [
            {"linkId": "l1", "fleet": "alpha", "kind": "bearer", "tokenSha256": "ab", "createdAtMs": 1},
            {"linkId": "l2", "fleet": "alpha", "kind": "tmux", "createdAtMs": 2,
             "socket": "/tmp/t", "session": "work"},
            {"linkId": "l3", "fleet": "alpha", "kind": "herdr", "createdAtMs": 3, "socket": "/tmp/h"}
        ]});
        let file: LinksFile = serde_json::from_value(old.clone()).expect("loads");
        let kinds: Vec<_> = file.links.iter().map(|l| l.kind).collect();
        assert_eq!(kinds, [LinkKind::Bearer, LinkKind::Tmux, LinkKind::Herdr]);
        assert!(file.links[0].local().is_none() && file.links[1].local().is_some());
        let back = serde_json::to_value(&file).expect("writes");
        for (i, kind) in ["bearer", "tmux", "herdr"].iter().enumerate() {
            assert_eq!(back["links"][i]["kind"], *kind);
        }
    }

    fn add_link(svc: &AdmissionService, token: &str) -> String {
        let mut guard = lock(&svc.inner.links);
        let id = format!("link-{}", guard.links.len());
        guard
            .update(|f| {
                f.links.push(LinkRecord {
                    link_id: id.clone(),
                    fleet: "alpha".into(),
                    kind: LinkKind::Bearer,
                    label: String::new(),
                    token_sha256: owner::token_hash(token),
                    created_at_ms: 0,
                    socket: String::new(),
                    session: String::new(),
                    expires_at_ms: 0,
                })
            })
            .expect("saved");
        id
    }

    /// A bearer link stops admitting at its expiry: a new admission is
    /// refused, and a ticket issued before stops rechecking.
    #[tokio::test]
    async fn an_expired_bearer_link_admits_nothing_and_its_tickets_stop() {
        let (_d, svc) = service().await;
        let link = add_link(&svc, "timed");
        let (link_id, p) = svc.admit_bearer("timed").expect("admit");
        let ticket = svc.issue_ticket(link_id, p, None);
        svc.recheck(&ticket, true).await.expect("recheck");
        lock(&svc.inner.links)
            .update(|f| {
                for l in f.links.iter_mut().filter(|l| l.link_id == link) {
                    l.expires_at_ms = now_ms() - 1;
                }
            })
            .expect("saved");
        let refused = svc.admit_bearer("timed").expect_err("expired");
        assert_eq!(refused.code, ErrorCode::FleetCredentialInvalid);
        assert!(refused.message.contains("expired"), "{}", refused.message);
        assert_eq!(
            svc.recheck(&ticket, true).await.expect_err("expired").code,
            ErrorCode::FleetAdmissionRevoked
        );
    }

    #[tokio::test]
    async fn bearer_admits_fleet_not_pane_and_revocation_ends_tickets() {
        let (_d, svc) = service().await;
        let link = add_link(&svc, "secret");
        assert_eq!(
            svc.admit_bearer("").expect_err("empty").code,
            ErrorCode::FleetCredentialRequired
        );
        assert_eq!(
            svc.admit_bearer("wrong").expect_err("wrong").code,
            ErrorCode::FleetCredentialInvalid
        );
        let (link_id, p) = svc.admit_bearer("secret").expect("admit");
        assert_eq!(p.fleet_id, "alpha");
        assert!(p.pane_id.is_empty());
        let ticket = svc.issue_ticket(link_id, p, None);
        svc.recheck(&ticket, true).await.expect("recheck");
        lock(&svc.inner.links)
            .update(|f| f.links.retain(|l| l.link_id != link))
            .expect("saved");
        assert_eq!(
            svc.recheck(&ticket, true).await.expect_err("revoked").code,
            ErrorCode::FleetAdmissionRevoked
        );
        // A lookup without observation (`TicketPrincipal`) stops with it,
        // and a ticket never issued names no one.
        assert_eq!(
            svc.recheck(&ticket, false).await.expect_err("revoked").code,
            ErrorCode::FleetAdmissionRevoked
        );
        assert_eq!(
            svc.recheck("tkt-forged", false)
                .await
                .expect_err("forged")
                .code,
            ErrorCode::FleetCredentialRequired
        );
    }

    #[tokio::test]
    async fn unreadable_settings_read_as_off() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = StatePaths::new(dir.path());
        owner::ensure_owner_token(&paths.owner_credential()).expect("owner");
        std::fs::create_dir_all(paths.service_dir("admission")).expect("dir");
        std::fs::write(paths.service_dir("admission").join("settings.json"), b"{{").expect("w");
        let svc = Options::new(paths)
            .build(tokio_util::sync::CancellationToken::new())
            .await
            .expect("build");
        assert_eq!(
            svc.inner.settings.borrow().to_pb().tools,
            FleetTools::Off as i32
        );
    }
}
