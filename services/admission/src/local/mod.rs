//! Local fleet proof: is the peer of a local connection a process inside a
//! pane of a linked multiplexer session?
//!
//! The full proof, from kernel facts and the pane host:
//! 1. the peer runs as our uid;
//! 2. the helper observes the peer and its ancestry (pidfs ids, start
//!    times); the peer is the very process the kernel named on the socket;
//! 3. a linked pane host reports a pane whose shell is in that lineage;
//! 4. a second fresh observation of the lineage, after the pane read, is
//!    identical up to the shell and nothing in it exited.
//!
//! Where the link's pane map (`clankie_panes::map`) knows a shell in the
//! first observation, alive and holding its pane's terminal, and the map
//! has applied every event its host wrote since, steps 3 and 4 are that
//! check instead: no pane read, one observation. A successful read records
//! its pane in the map for later proofs. `docs/SECURITY.md`, "The pane
//! map", says why a stale entry cannot admit.
//!
//! Anything uncertain refuses: unavailable helpers or pane hosts answer
//! `fleet_admission_unavailable` (retryable, nothing forwarded), a definite
//! non-member `local_process_membership_required`.
//!
//! A proof is later rechecked cheaply (the lineage still alive with the same
//! identities, the pane host still reporting that shell, the link still
//! there) instead of being redone.

mod launcher;
mod seat;

pub use seat::{SeatRefusal, observe_seat};

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::helper::v1 as helper_pb;
use clankie_runtime::{ClankieError, ErrorCode};

use std::sync::atomic::{AtomicU64, Ordering};

use crate::helper::HelperClient;
use clankie_panes::{Herdr, Hit, Pane, PaneError, PaneHost, PaneMap, Shell, Tmux};

/// Pane-host reads asked since the service started, and proofs and
/// rechecks answered from a pane map instead.
static PANE_READS: AtomicU64 = AtomicU64::new(0);
static MAP_HITS: AtomicU64 = AtomicU64::new(0);

/// (pane-host reads, pane map hits) since the service started.
pub fn pane_counters() -> (u64, u64) {
    (
        PANE_READS.load(Ordering::Relaxed),
        MAP_HITS.load(Ordering::Relaxed),
    )
}

/// One observed process identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub pid: i32,
    pub pidfs_id: u64,
    pub start_time: u64,
}

/// A successful proof, bound to one connection.
#[derive(Debug, Clone)]
pub struct Proof {
    pub link_id: String,
    pub fleet: String,
    pub pane_id: String,
    /// From the peer up to and including the pane's shell.
    pub lineage: Vec<Identity>,
}

/// A pane host named by a local link.
#[derive(Debug, Clone)]
pub enum Host {
    Tmux(Tmux),
    Herdr(Herdr),
}

impl Host {
    async fn panes(&self) -> Result<Vec<Pane>, PaneError> {
        PANE_READS.fetch_add(1, Ordering::Relaxed);
        match self {
            Host::Tmux(t) => t.panes().await,
            Host::Herdr(h) => h.panes().await,
        }
    }

    async fn pane(&self, id: &str) -> Result<Pane, PaneError> {
        PANE_READS.fetch_add(1, Ordering::Relaxed);
        match self {
            Host::Tmux(t) => t.pane(id).await,
            Host::Herdr(h) => h.pane(id).await,
        }
    }

    /// The host's pane map, where it keeps one (a tmux session link, or a
    /// Herdr server).
    pub(crate) fn map(&self) -> Option<&PaneMap> {
        match self {
            Host::Tmux(t) => t.map(),
            Host::Herdr(h) => Some(h.map()),
        }
    }

    /// Where a read's answer is to be recorded: the map, and its epoch
    /// taken before the read.
    pub(crate) fn begin_read(&self) -> Option<(&PaneMap, Option<u64>)> {
        self.map().map(|m| (m, m.begin_read()))
    }
}

/// A shell as the map holds it, from the kernel's fact.
pub(crate) fn shell_of(f: &helper_pb::ProcessFact) -> Shell {
    Shell {
        pid: f.pid,
        pidfs_id: f.pidfs_id,
        start_time: f.start_time,
        tty: f.tty,
    }
}

/// Whether the kernel's fact shows the map entry's very shell, alive and
/// still holding the terminal it held when the entry was recorded. A pane
/// that closed hung its terminal up, which takes it from its shell.
pub(crate) fn shows(hit: &Hit, f: &helper_pb::ProcessFact) -> bool {
    !f.exited && f.tty != 0 && hit.shell == shell_of(f)
}

/// The map answer for a pane whose shell the caller observed as `fact`:
/// the entry, confirmed after the observation. Counts a hit.
pub(crate) fn map_holds(host: &Host, pane_id: &str, fact: &helper_pb::ProcessFact) -> bool {
    let Some(map) = host.map() else { return false };
    let held = map
        .by_pane(pane_id)
        .is_some_and(|hit| shows(&hit, fact) && map.holds(&hit));
    if held {
        MAP_HITS.fetch_add(1, Ordering::Relaxed);
    }
    held
}

/// A link as the proof needs it.
#[derive(Debug, Clone)]
pub struct LocalLink {
    pub link_id: String,
    pub fleet: String,
    pub host: Host,
}

/// A refusal with its fixed reason, for the counters.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub reason: &'static str,
    pub error: ClankieError,
}

impl From<Refusal> for ClankieError {
    fn from(r: Refusal) -> Self {
        r.error
    }
}

/// Logs a refusal with a fixed reason and stage, and builds the error.
pub(crate) fn refuse(code: ErrorCode, reason: &'static str, stage: &'static str) -> Refusal {
    tracing::info!(reason, stage, "fleet.local_proof.refused");
    let message = match code {
        ErrorCode::FleetAdmissionUnavailable => {
            "local fleet proof is unavailable right now; nothing was forwarded, retry shortly"
        }
        _ => {
            "this process is not inside a pane of a linked session; ask the lead for fleet admission"
        }
    };
    Refusal {
        reason,
        error: code.err(format!("{message} ({reason})")),
    }
}

fn not_member(reason: &'static str, stage: &'static str) -> Refusal {
    refuse(ErrorCode::LocalProcessMembershipRequired, reason, stage)
}

fn unavailable(reason: &'static str, stage: &'static str) -> Refusal {
    refuse(ErrorCode::FleetAdmissionUnavailable, reason, stage)
}

/// What the helper's refusal of a loopback census means for the caller:
/// not a member when the kernel says the connection is not a pane
/// process's, unavailable when it could not tell. Every reason is named, so
/// a new one must be placed here before admission builds.
fn census_refusal(reason: helper_pb::Reason) -> Refusal {
    use clankie_types::helper::reason_name;
    use helper_pb::Reason as R;
    match reason {
        R::SocketNotFound | R::NotLoopback => not_member(reason_name(reason), "census"),
        R::CensusUnstable | R::CensusTimeout => unavailable(reason_name(reason), "census"),
        R::Unspecified
        | R::UnknownJob
        | R::ReplyTooLarge
        | R::TooManyPids
        | R::BadAddress
        | R::ProcessGone
        | R::ObservationDenied
        | R::ObservationFailed
        | R::SockDiagFailed
        | R::SockDiagMalformed
        | R::CensusUnknownOwner
        | R::ProcUnreadable => unavailable("census_failed", "census"),
    }
}

pub(crate) async fn observe(
    helper: &HelperClient,
    pids: Vec<i32>,
    ancestry: bool,
) -> Result<Vec<helper_pb::ProcessFact>, Refusal> {
    observe_job(
        helper,
        helper_pb::ObserveProcesses {
            pids,
            with_ancestry: ancestry,
            identity_only: false,
        },
    )
    .await
}

/// Observes only the identities of `pids` (and their terminals), which is
/// all a recheck compares.
pub(crate) async fn observe_identities(
    helper: &HelperClient,
    pids: Vec<i32>,
) -> Result<Vec<helper_pb::ProcessFact>, Refusal> {
    observe_job(
        helper,
        helper_pb::ObserveProcesses {
            pids,
            with_ancestry: false,
            identity_only: true,
        },
    )
    .await
}

async fn observe_job(
    helper: &HelperClient,
    job: helper_pb::ObserveProcesses,
) -> Result<Vec<helper_pb::ProcessFact>, Refusal> {
    let reply = helper
        .run(helper_pb::request::Job::Observe(job))
        .await
        .map_err(|f| unavailable(f.reason(), "observe"))?;
    match reply.result {
        Some(helper_pb::reply::Result::Observation(o)) => Ok(o.processes),
        Some(helper_pb::reply::Result::Error(_)) => {
            Err(unavailable("observation_failed", "observe"))
        }
        _ => Err(unavailable("helper_malformed_reply", "observe")),
    }
}

pub(crate) fn identity(f: &helper_pb::ProcessFact) -> Identity {
    Identity {
        pid: f.pid,
        pidfs_id: f.pidfs_id,
        start_time: f.start_time,
    }
}

/// The peer of a local connection, as the gateway saw it.
#[derive(Debug, Clone)]
pub enum Peer {
    /// A Unix socket: the kernel named the peer (SO_PEERCRED, SO_PEERPIDFD).
    Unix { pid: i32, uid: u32, pidfs_id: u64 },
    /// A Unix connection whose bytes came from another process too.
    SharedUnix,
    /// Loopback TCP: the connection's two ends; the owner is found by
    /// sock_diag and the descriptor census.
    Tcp(admission_pb::TcpEnds),
}

impl Peer {
    pub fn from_request(req: &admission_pb::ProveLocalRequest) -> Peer {
        match &req.tcp {
            Some(ends) => Peer::Tcp(ends.clone()),
            None if req.foreign_writer => Peer::SharedUnix,
            None => Peer::Unix {
                pid: req.pid,
                uid: req.uid,
                pidfs_id: req.pidfs_id,
            },
        }
    }
}

/// The single process holding a loopback connection's client socket, and
/// its lineage observed in the same helper job, starting from the holder
/// bound to the socket by its pidfd.
async fn loopback_owner(
    helper: &HelperClient,
    ends: &admission_pb::TcpEnds,
) -> Result<(u32, Vec<helper_pb::ProcessFact>), Refusal> {
    let reply = helper
        .run(helper_pb::request::Job::LoopbackHolders(
            helper_pb::FindLoopbackHolders {
                client_ip: ends.client_ip.clone(),
                client_port: ends.client_port,
                server_ip: ends.server_ip.clone(),
                server_port: ends.server_port,
            },
        ))
        .await
        .map_err(|f| unavailable(f.reason(), "census"))?;
    let found = match reply.result {
        Some(helper_pb::reply::Result::Loopback(l)) => l,
        Some(helper_pb::reply::Result::Error(e)) => return Err(census_refusal(e.reason())),
        _ => return Err(unavailable("helper_malformed_reply", "census")),
    };
    if found.uid != nix::unistd::getuid().as_raw() {
        return Err(not_member("other_uid", "census"));
    }
    let holders = found.holders.unwrap_or_default();
    if holders.privileged > 0 {
        tracing::debug!(
            shielded = holders.privileged,
            "fleet.local_proof.diagnostic: privileged processes outside the census"
        );
    }
    if holders.unreadable > 0 {
        return Err(unavailable("census_unknown_owner", "census"));
    }
    match holders.pids.as_slice() {
        // The holder let go of the socket, or its pid now names another
        // process: whoever holds it now was never counted.
        [pid] => match found.lineage.first() {
            Some(holder) if holder.pid == *pid && !holder.exited => Ok((found.uid, found.lineage)),
            _ => Err(not_member("owner_changed", "census")),
        },
        [] => Err(not_member("no_holder", "census")),
        _ => Err(not_member("shared_descriptor", "census")),
    }
}

/// Runs the full proof for a connection's peer.
pub async fn prove(
    helper: &HelperClient,
    links: &[LocalLink],
    peer: &Peer,
) -> Result<Proof, Refusal> {
    if links.is_empty() {
        return Err(not_member("no_linked_session", "links"));
    }
    // Over TCP the census job observes the holder's lineage too, so the
    // first observation of the bracket costs no second helper round trip.
    let (pid, uid, pidfs_id, first) = match peer {
        Peer::SharedUnix => return Err(not_member("shared_descriptor", "writer")),
        Peer::Unix { pid, uid, pidfs_id } => (*pid, *uid, *pidfs_id, None),
        Peer::Tcp(ends) => {
            let (uid, lineage) = loopback_owner(helper, ends).await?;
            let holder = lineage.first().map(|f| (f.pid, f.pidfs_id));
            let (pid, pidfs_id) = holder.unwrap_or_default();
            (pid, uid, pidfs_id, Some(lineage))
        }
    };
    if uid != nix::unistd::getuid().as_raw() {
        return Err(not_member("other_uid", "peer"));
    }
    let first = match first {
        Some(lineage) => lineage,
        None => observe(helper, vec![pid], true).await?,
    };
    let owner = first
        .first()
        .ok_or_else(|| unavailable("no_observation", "observe"))?;
    if owner.exited || owner.pidfs_id == 0 && owner.start_time == 0 {
        return Err(not_member("peer_exited", "observe"));
    }
    if pidfs_id != 0 && owner.pidfs_id != pidfs_id {
        return Err(not_member("peer_replaced", "observe"));
    }
    if owner.uid != uid {
        return Err(not_member("other_uid", "observe"));
    }
    // A shell the map knows, confirmed after this observation: no read.
    for link in links {
        let Some(map) = link.host.map() else { continue };
        for (i, f) in first.iter().enumerate() {
            if let Some(hit) = map.by_shell(f.pid)
                && shows(&hit, f)
                && map.holds(&hit)
            {
                MAP_HITS.fetch_add(1, Ordering::Relaxed);
                return Ok(Proof {
                    link_id: link.link_id.clone(),
                    fleet: link.fleet.clone(),
                    pane_id: hit.pane_id,
                    lineage: first[..=i].iter().map(identity).collect(),
                });
            }
        }
    }
    // Read the panes between the two observations.
    let mut host_unavailable = false;
    let mut found: Option<(usize, &LocalLink, Pane, Option<u64>)> = None;
    'links: for link in links {
        let began = link.host.map().and_then(PaneMap::begin_read);
        match link.host.panes().await {
            Ok(panes) => {
                for pane in panes {
                    if let Some(i) = first.iter().position(|f| f.pid == pane.shell_pid) {
                        found = Some((i, link, pane, began));
                        break 'links;
                    }
                }
            }
            Err(_) => host_unavailable = true,
        }
    }
    let Some((shell_index, link, pane, began)) = found else {
        return Err(if host_unavailable {
            unavailable("pane_host_unavailable", "panes")
        } else {
            not_member("no_pane_in_lineage", "panes")
        });
    };
    let second = observe(helper, vec![pid], true).await?;
    let before: Vec<Identity> = first[..=shell_index].iter().map(identity).collect();
    let after: Vec<Identity> = second.iter().take(shell_index + 1).map(identity).collect();
    if before != after
        || second[..=shell_index.min(second.len() - 1)]
            .iter()
            .any(|f| f.exited)
    {
        return Err(not_member("lineage_changed", "bracket"));
    }
    if let Some(map) = link.host.map() {
        map.record(
            began,
            &pane.pane_id,
            &pane.window,
            shell_of(&second[shell_index]),
        );
    }
    // Over TCP no second census follows: the holder's identity is bound to
    // the socket at the census and compared by the bracket above, and a
    // copy of the socket made after the census is the holder's own doing
    // (docs/SECURITY.md, "One census per loopback proof").
    Ok(Proof {
        link_id: link.link_id.clone(),
        fleet: link.fleet.clone(),
        pane_id: pane.pane_id,
        lineage: before,
    })
}

/// The cheap recheck of a connection's proof.
pub async fn recheck(
    helper: &HelperClient,
    link: &LocalLink,
    proof: &Proof,
) -> Result<(), Refusal> {
    let pids: Vec<i32> = proof.lineage.iter().map(|i| i.pid).collect();
    let now = observe_identities(helper, pids).await?;
    if now.len() != proof.lineage.len()
        || now.iter().any(|f| f.exited)
        || now.iter().map(identity).collect::<Vec<_>>() != proof.lineage
    {
        return Err(not_member("lineage_changed", "recheck"));
    }
    let shell = proof.lineage.last().map(|i| i.pid).unwrap_or(0);
    let Some(shell_fact) = now.last() else {
        return Err(unavailable("no_observation", "recheck"));
    };
    if map_holds(&link.host, &proof.pane_id, shell_fact) {
        return Ok(());
    }
    let began = link.host.begin_read();
    match link.host.pane(&proof.pane_id).await {
        Ok(p) if p.shell_pid == shell => {
            if let Some((map, began)) = began {
                map.record(began, &p.pane_id, &p.window, shell_of(shell_fact));
            }
            Ok(())
        }
        Ok(_) => Err(not_member("pane_shell_changed", "recheck")),
        Err(PaneError::NotFound) => Err(not_member("pane_gone", "recheck")),
        Err(PaneError::Unavailable(_)) => Err(unavailable("pane_host_unavailable", "recheck")),
    }
}

/// The agent status a pane host reports for a pane (Herdr only).
pub async fn agent_status(link: &LocalLink, pane_id: &str) -> Result<String, Refusal> {
    match &link.host {
        Host::Tmux(_) => Ok(String::new()),
        Host::Herdr(h) => match h
            .request("pane.get", serde_json::json!({ "pane_id": pane_id }))
            .await
        {
            Ok(v) => Ok(v["pane"]["agent_status"].as_str().unwrap_or("").to_string()),
            Err(PaneError::NotFound) => Err(not_member("pane_gone", "status")),
            Err(PaneError::Unavailable(_)) => Err(unavailable("pane_host_unavailable", "status")),
        },
    }
}
