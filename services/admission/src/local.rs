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
//! Anything uncertain refuses: unavailable helpers or pane hosts answer
//! `fleet_admission_unavailable` (retryable, nothing forwarded), a definite
//! non-member `local_process_membership_required`.
//!
//! A proof is later rechecked cheaply (the lineage still alive with the same
//! identities, the pane host still reporting that shell, the link still
//! there) instead of being redone.

use clankie_proto::helper::v1 as hpb;
use clankie_runtime::{ClankieError, ErrorCode};

use crate::helper::HelperClient;
use crate::panes::{Herdr, Pane, PaneError, PaneHost, Tmux};

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
        match self {
            Host::Tmux(t) => t.panes().await,
            Host::Herdr(h) => h.panes().await,
        }
    }

    async fn pane(&self, id: &str) -> Result<Pane, PaneError> {
        match self {
            Host::Tmux(t) => t.pane(id).await,
            Host::Herdr(h) => h.pane(id).await,
        }
    }
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
fn refuse(code: ErrorCode, reason: &'static str, stage: &'static str) -> Refusal {
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

async fn observe(
    helper: &HelperClient,
    pids: Vec<i32>,
    ancestry: bool,
) -> Result<Vec<hpb::ProcessFact>, Refusal> {
    let reply = helper
        .run(hpb::request::Job::Observe(hpb::ObserveProcesses {
            pids,
            with_ancestry: ancestry,
        }))
        .await
        .map_err(|f| unavailable(f.reason(), "observe"))?;
    match reply.result {
        Some(hpb::reply::Result::Observation(o)) => Ok(o.processes),
        Some(hpb::reply::Result::Error(_)) => Err(unavailable("observation_failed", "observe")),
        _ => Err(unavailable("helper_malformed_reply", "observe")),
    }
}

fn identity(f: &hpb::ProcessFact) -> Identity {
    Identity {
        pid: f.pid,
        pidfs_id: f.pidfs_id,
        start_time: f.start_time,
    }
}

/// Runs the full proof for a connection's peer.
pub async fn prove(
    helper: &HelperClient,
    links: &[LocalLink],
    pid: i32,
    uid: u32,
    pidfs_id: u64,
) -> Result<Proof, Refusal> {
    if uid != nix::unistd::getuid().as_raw() {
        return Err(not_member("other_uid", "peer"));
    }
    if links.is_empty() {
        return Err(not_member("no_linked_session", "links"));
    }
    let first = observe(helper, vec![pid], true).await?;
    let peer = first
        .first()
        .ok_or_else(|| unavailable("no_observation", "observe"))?;
    if peer.exited || peer.pidfs_id == 0 && peer.start_time == 0 {
        return Err(not_member("peer_exited", "observe"));
    }
    if pidfs_id != 0 && peer.pidfs_id != pidfs_id {
        return Err(not_member("peer_replaced", "observe"));
    }
    if peer.uid != uid {
        return Err(not_member("other_uid", "observe"));
    }
    // Read the panes between the two observations.
    let mut host_unavailable = false;
    let mut found: Option<(usize, &LocalLink, Pane)> = None;
    'links: for link in links {
        match link.host.panes().await {
            Ok(panes) => {
                for pane in panes {
                    if let Some(i) = first.iter().position(|f| f.pid == pane.shell_pid) {
                        found = Some((i, link, pane));
                        break 'links;
                    }
                }
            }
            Err(_) => host_unavailable = true,
        }
    }
    let Some((shell_index, link, pane)) = found else {
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
    let now = observe(helper, pids, false).await?;
    if now.len() != proof.lineage.len()
        || now.iter().any(|f| f.exited)
        || now.iter().map(identity).collect::<Vec<_>>() != proof.lineage
    {
        return Err(not_member("lineage_changed", "recheck"));
    }
    let shell = proof.lineage.last().map(|i| i.pid).unwrap_or(0);
    match link.host.pane(&proof.pane_id).await {
        Ok(p) if p.shell_pid == shell => Ok(()),
        Ok(_) => Err(not_member("pane_shell_changed", "recheck")),
        Err(PaneError::NotFound) => Err(not_member("pane_gone", "recheck")),
        Err(PaneError::Unavailable(_)) => Err(unavailable("pane_host_unavailable", "recheck")),
    }
}
