//! The exact Claude launcher's route: a Claude seat is proven only through
//! `clankie claude`, this stack's own launcher, with Claude its direct
//! child.
//!
//! `clankie claude` stays its pane's foreground process group leader while
//! the real Claude runs as its direct child, so the foreground leader is
//! not the agent. For this one launcher, and no generic wrapper, the seat
//! names Claude instead: the leader (or, under the worker sandbox, the
//! command the sandbox started first as the leader) must be this stack's
//! own `clankie` binary running the `claude` subcommand, and the agent is
//! its direct child in the same foreground group on the socket's ancestry.
//! Anything else under that launcher (no child on the ancestry, a child of
//! another parent or group) refuses as `launcher_mismatch`. Whether the
//! child is the Claude a hire recorded is the mailbox's check, against the
//! hire's harness.

use std::path::PathBuf;
use std::sync::OnceLock;

use clankie_proto::helper::v1 as helper_pb;
use clankie_runtime::ErrorCode;

use super::{Identity, Refusal, identity, refuse};

/// The seat's agent, and the launcher whose child it is.
pub struct Named {
    pub agent: helper_pb::ProcessFact,
    pub launcher: Option<helper_pb::ProcessFact>,
}

/// This stack's own `clankie`: the binary beside the admission service.
fn own_clankie() -> Option<&'static str> {
    static OWN: OnceLock<Option<String>> = OnceLock::new();
    OWN.get_or_init(|| {
        let dir = std::env::current_exe().ok()?.parent()?.to_path_buf();
        let path: PathBuf = std::fs::canonicalize(dir.join("clankie")).ok()?;
        Some(path.to_string_lossy().into_owned())
    })
    .as_deref()
}

/// Whether `fact` is the exact launcher: our own binary (or it, replaced
/// on disk while the launcher ran, as the kernel then names it) running
/// the `claude` subcommand.
fn is_launcher(fact: &helper_pb::ProcessFact) -> bool {
    let Some(own) = own_clankie() else {
        return false;
    };
    let exe = fact.executable.as_str();
    (exe == own || exe.strip_suffix(" (deleted)") == Some(own))
        && fact.argv.get(1).map(String::as_str) == Some("claude")
}

fn mismatch() -> Refusal {
    refuse(ErrorCode::LauncherMismatch, "launcher_mismatch", "seat")
}

/// Names the agent of a pane whose foreground leader is `leader`: the
/// leader itself, or, behind the exact launcher, the launcher's child.
/// `facts` are the socket's ancestry as observed at this checkpoint, one
/// per `lineage` entry and already held to it.
pub fn name_agent(
    lineage: &[Identity],
    facts: &[helper_pb::ProcessFact],
    leader: helper_pb::ProcessFact,
) -> Result<Named, Refusal> {
    let Some(at) = lineage.iter().position(|i| *i == identity(&leader)) else {
        // Not on the socket's ancestry: the caller refuses that itself.
        return Ok(Named {
            agent: leader,
            launcher: None,
        });
    };
    let (launcher, at) = if is_launcher(&leader) {
        (leader.clone(), at)
    } else {
        match sandboxed_launcher(facts, &leader, at) {
            Some(found) => found,
            None => {
                return Ok(Named {
                    agent: leader,
                    launcher: None,
                });
            }
        }
    };
    // The launcher's direct child on the socket's ancestry, in its group.
    let Some(child) = at.checked_sub(1).and_then(|i| facts.get(i)) else {
        return Err(mismatch());
    };
    let is_child = !child.exited
        && child.ppid == launcher.pid
        && child.pgid == launcher.pgid
        && child.uid == launcher.uid;
    if !is_child {
        return Err(mismatch());
    }
    Ok(Named {
        agent: child.clone(),
        launcher: Some(launcher),
    })
}

/// Under the worker sandbox the leader is the sandbox: the launcher is then
/// the one command its init started first (pid 2 of the namespace below),
/// two places below the leader on the ancestry.
fn sandboxed_launcher(
    facts: &[helper_pb::ProcessFact],
    leader: &helper_pb::ProcessFact,
    at: usize,
) -> Option<(helper_pb::ProcessFact, usize)> {
    let (f, i) = (facts.get(at.checked_sub(2)?)?, facts.get(at - 1)?);
    let started_first = !f.exited
        && !i.exited
        && i.ppid == leader.pid
        && i.ns_pid == 1
        && i.executable == leader.executable
        && f.ppid == i.pid
        && f.ns_pid == 2;
    (started_first && is_launcher(f)).then(|| (f.clone(), at - 2))
}
