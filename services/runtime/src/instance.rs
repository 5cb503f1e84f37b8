//! One running instance of a service per state folder, proven by an
//! exclusive lock it holds for its whole life: a record a replaced instance
//! left behind is then known to be no live request's. Also the test crash
//! points that stand in for `kill -9` at an exact step.

use std::io;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

/// The held lock and this instance's id (new for every start).
pub struct Instance {
    _lock: Flock<std::fs::File>,
    pub id: String,
}

/// Takes the exclusive lock at `path` (created 0600) without waiting;
/// another live instance holding it is an error.
pub fn hold(path: &Path) -> io::Result<Instance> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)?;
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("another instance holds {} ({errno})", path.display()),
        )
    })?;
    let id = format!("{:016x}", rand::random::<u64>());
    Ok(Instance { _lock: lock, id })
}

/// A test hook: when `dir/crash-once-STEP` exists, it is removed and the
/// process aborts at that step, as `kill -9` would there.
pub fn crash_once(dir: &Path, step: &str) {
    let marker = dir.join(format!("crash-once-{step}"));
    if marker.exists() && std::fs::remove_file(&marker).is_ok() {
        let _ = crate::state::sync_dir(dir);
        tracing::warn!(step, "crash_point");
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_instance_is_refused_until_the_first_is_gone() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("instance.lock");
        let first = hold(&path).expect("first");
        let refused = hold(&path).err().expect("second refused");
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse);
        let id = first.id.clone();
        drop(first);
        let next = hold(&path).expect("after the first is gone");
        assert_ne!(next.id, id, "every start is a new instance");
    }
}
