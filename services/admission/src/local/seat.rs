//! A proven connection's native seat, observed fresh with its proof
//! rechecked in the same bracket.
//!
//! One observation of the whole socket ancestry (owner up to the pane's
//! shell) at each of two checkpoints, around one fresh pane read:
//! - each checkpoint holds every process to the identity the proof
//!   recorded, none exited: that is the recheck;
//! - the shell's terminal names its foreground process group leader, the
//!   agent, which must sit on that same ancestry (behind the exact Claude
//!   launcher, the agent is the launcher's child there);
//! - the pane host must still report that shell for the pane.
//!
//! The agent, its launcher and the connection's owner are all ancestry
//! members, so their facts come from the checkpoint's one observation.
//! Only a foreground leader off the ancestry (which refuses) is observed
//! on its own.
//!
//! Where the link's pane map holds the pane with this very shell, still
//! holding its terminal in the first checkpoint, the map's check replaces
//! the pane read and no second checkpoint is needed: nothing was read
//! between them to bracket. The map is the only thing kept between
//! requests, and it never answers without that observation.

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::helper::v1 as helper_pb;
use clankie_runtime::ErrorCode;

use super::launcher::{self, Named};
use super::{Identity, LocalLink, PaneError, Proof, Refusal};
use super::{identity, map_holds, not_member, observe, refuse, shell_of, unavailable};
use crate::helper::HelperClient;

/// Why no seat was observed.
pub enum SeatRefusal {
    /// The proof itself no longer holds (the ancestry changed, the pane is
    /// gone or has another shell): its ticket must be discarded.
    Stale(Refusal),
    /// The proof holds, but its pane shows no seat for this connection.
    NoSeat(Refusal),
}

impl SeatRefusal {
    pub fn refusal(self) -> Refusal {
        match self {
            SeatRefusal::Stale(r) | SeatRefusal::NoSeat(r) => r,
        }
    }
}

impl From<Refusal> for SeatRefusal {
    fn from(r: Refusal) -> Self {
        SeatRefusal::NoSeat(r)
    }
}

/// One checkpoint: the ancestry's facts, and the agent they name.
struct Checkpoint {
    facts: Vec<helper_pb::ProcessFact>,
    named: Named,
}

/// Observes the ancestry once and names its seat's agent.
async fn checkpoint(
    helper: &HelperClient,
    lineage: &[Identity],
) -> Result<Checkpoint, SeatRefusal> {
    let pids: Vec<i32> = lineage.iter().map(|i| i.pid).collect();
    let facts = observe(helper, pids, false).await?;
    if facts.len() != lineage.len()
        || facts.iter().any(|f| f.exited)
        || facts.iter().map(identity).ne(lineage.iter().cloned())
    {
        return Err(SeatRefusal::Stale(not_member("lineage_changed", "seat")));
    }
    let shell = facts
        .last()
        .ok_or_else(|| unavailable("no_observation", "seat"))?;
    // The terminal's foreground process group leader is the agent. A
    // command hired straight into a pane is its own foreground: then the
    // pane's process is the agent. (An idle interactive shell is its own
    // foreground too, so its background jobs sit under that shell's seat:
    // the pane is a member either way.)
    let agent_pid = shell.tpgid;
    if agent_pid <= 0 {
        return Err(not_member("no_foreground_agent", "seat").into());
    }
    let leader = match facts.iter().find(|f| f.pid == agent_pid) {
        Some(f) => f.clone(),
        // Off the ancestry: observed only to say why it refuses.
        None => observe(helper, vec![agent_pid], false)
            .await?
            .into_iter()
            .next()
            .filter(|f| !f.exited)
            .ok_or_else(|| not_member("no_foreground_agent", "seat"))?,
    };
    if leader.uid != nix::unistd::getuid().as_raw() {
        return Err(not_member("other_uid", "seat").into());
    }
    let named = launcher::name_agent(lineage, &facts, leader)?;
    Ok(Checkpoint { facts, named })
}

/// Observes the seat of a proven connection, rechecking the proof in the
/// same bracket (see the module's note).
pub async fn observe_seat(
    helper: &HelperClient,
    link: &LocalLink,
    proof: &Proof,
) -> Result<admission_pb::SeatIdentity, SeatRefusal> {
    let shell = proof
        .lineage
        .last()
        .cloned()
        .ok_or_else(|| unavailable("no_observation", "seat"))?;
    let before = checkpoint(helper, &proof.lineage).await?;
    let held = before
        .facts
        .last()
        .is_some_and(|f| map_holds(&link.host, &proof.pane_id, f));
    let after = if held {
        None
    } else {
        let began = link.host.begin_read();
        match link.host.pane(&proof.pane_id).await {
            Ok(p) if p.shell_pid == shell.pid => {
                let after = checkpoint(helper, &proof.lineage).await?;
                if let (Some((map, began)), Some(f)) = (began, after.facts.last()) {
                    map.record(began, &p.pane_id, &p.window, shell_of(f));
                }
                Some(after)
            }
            Ok(_) => return Err(SeatRefusal::Stale(not_member("pane_shell_changed", "seat"))),
            Err(PaneError::NotFound) => {
                return Err(SeatRefusal::Stale(not_member("pane_gone", "seat")));
            }
            Err(PaneError::Unavailable(_)) => {
                return Err(unavailable("pane_host_unavailable", "seat").into());
            }
        }
    };
    if let Some(after) = &after {
        let same = |a: &helper_pb::ProcessFact, b: &helper_pb::ProcessFact| {
            identity(a) == identity(b) && a.executable == b.executable && a.argv == b.argv
        };
        let (b, a) = (&before.named, &after.named);
        match (&b.launcher, &a.launcher) {
            (None, None) => {}
            (Some(x), Some(y)) if same(x, y) && same(&b.agent, &a.agent) => {}
            _ => {
                return Err(refuse(ErrorCode::LauncherMismatch, "launcher_changed", "seat").into());
            }
        }
        if !same(&b.agent, &a.agent) {
            return Err(not_member("foreground_changed", "seat").into());
        }
    }
    let Checkpoint {
        facts,
        named: Named { agent, launcher },
    } = after.unwrap_or(before);
    // The socket's ancestry must pass through this very agent.
    if !proof.lineage.contains(&identity(&agent)) {
        return Err(not_member("foreground_mismatch", "seat").into());
    }
    let owner_is_harness = owner_is_harness(&facts, &agent);
    let pb_identity = |i: &Identity| admission_pb::ProcessIdentity {
        pid: i.pid,
        pidfs_id: i.pidfs_id,
        start_time: i.start_time,
    };
    Ok(admission_pb::SeatIdentity {
        fleet: proof.fleet.clone(),
        link_id: proof.link_id.clone(),
        pane_id: proof.pane_id.clone(),
        shell: Some(pb_identity(&shell)),
        agent: Some(pb_identity(&identity(&agent))),
        agent_executable: agent.executable,
        agent_argv: agent.argv.into_iter().take(64).collect(),
        settings: None,
        owner_is_harness,
        launcher_argv: launcher
            .as_ref()
            .map(|l| l.argv.clone())
            .unwrap_or_default(),
        launcher: launcher.as_ref().map(|l| pb_identity(&identity(l))),
        owner_parent: proof.lineage.get(1).map(pb_identity),
        owner: proof.lineage.first().map(pb_identity),
    })
}

/// Whether the connection's owner (the ancestry's first process) is the
/// harness itself rather than something it started: the agent, or, for an
/// agent that is the worker sandbox, the one command the sandbox's init
/// started first. That command is pid 2 of a pid namespace one below the
/// agent's; its parent is that namespace's init (pid 1, running the agent's
/// own executable), whose parent is the agent. A process the harness starts
/// is neither: the namespace never hands out pid 2 again while the harness
/// lives, and an orphan the init adopts keeps its own pid. `facts` are the
/// ancestry as the last checkpoint observed it.
fn owner_is_harness(facts: &[helper_pb::ProcessFact], agent: &helper_pb::ProcessFact) -> bool {
    let agent_id = identity(agent);
    let (o, i) = match facts {
        [owner, ..] if identity(owner) == agent_id => return true,
        [owner, init, parent, ..] if identity(parent) == agent_id => (owner, init),
        _ => return false,
    };
    i.executable == agent.executable
        && i.ppid == agent.pid
        && i.ns_pid == 1
        && i.ns_depth == agent.ns_depth + 1
        && o.ppid == i.pid
        && o.ns_pid == 2
        && o.ns_depth == i.ns_depth
}
