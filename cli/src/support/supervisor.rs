//! Which process is this state folder's `clankie up`: the supervisor writes
//! `run/up.json` (0600, by atomic rename) with its pid and start time as it
//! starts, and removes it as it stops. `down` and `logs` find it there and
//! believe it only while the kernel agrees: the pid is alive with that same
//! start time (never a reused pid), as this user, running a `clankie`.

use std::path::PathBuf;

use clankie_runtime::paths::StatePaths;
use clankie_runtime::state::{self, Loaded};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub pid: i32,
    pub start_time: u64,
}

fn file(paths: &StatePaths) -> PathBuf {
    paths.run_dir().join("up.json")
}

/// Records this process as the supervisor.
pub fn record(paths: &StatePaths) -> std::io::Result<()> {
    let me = Record {
        pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        start_time: clankie_runtime::peer::own_start_time().unwrap_or(0),
    };
    state::save_json(&file(paths), &me)
}

/// Forgets the record (the supervisor stopped).
pub fn forget(paths: &StatePaths) {
    let _ = std::fs::remove_file(file(paths));
}

/// The running supervisor, if the record names a live one.
pub fn running(paths: &StatePaths) -> Option<Record> {
    let Loaded::Ok(r) = state::load_json::<Record>(&file(paths)) else {
        return None;
    };
    alive(&r).then_some(r)
}

/// The record's process is alive, the same one (its start time), ours, and
/// a `clankie`.
pub fn alive(r: &Record) -> bool {
    if r.start_time == 0 || clankie_runtime::peer::start_time_of(r.pid) != Some(r.start_time) {
        return false;
    }
    let ours = std::fs::metadata(format!("/proc/{}", r.pid)).is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt as _;
        m.uid() == nix::unistd::getuid().as_raw()
    });
    let clankie = std::fs::read_link(format!("/proc/{}/exe", r.pid))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .is_some_and(|n| n == "clankie" || n.starts_with("clankie ("));
    ours && clankie && !exited(r.pid)
}

/// An exited process its parent has not reaped yet (a zombie) is gone.
fn exited(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| {
            t.rfind(')')
                .and_then(|i| t[i + 1..].split_whitespace().next().map(str::to_string))
        })
        .is_none_or(|state| state == "Z" || state == "X")
}
