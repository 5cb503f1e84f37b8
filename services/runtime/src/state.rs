//! Durable state files: written by atomic rename after fsync.
//!
//! A reader never sees a torn file: the bytes go to a temporary sibling,
//! which is synced, renamed over the target, and the directory is synced so
//! the rename itself survives a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use serde::{Serialize, de::DeserializeOwned};

/// Creates a directory (and parents) with mode 0700.
pub fn private_dir(path: &Path) -> io::Result<()> {
    fs::create_dir_all(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
}

/// Makes every file and folder this process creates from now on private to
/// its user (umask 077). The stack's processes call it first, so a log, a
/// journal, a socket or a database is never readable by another account,
/// whatever the caller's umask was. Children inherit it.
pub fn private_umask() {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
}

/// Takes group and other access away from everything under `root` (a
/// state folder written by a release with a looser umask). Symlinks are not
/// followed. Returns how many entries it changed.
pub fn tighten(root: &Path) -> io::Result<usize> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut changed = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = fs::symlink_metadata(&p)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            fs::set_permissions(&p, fs::Permissions::from_mode(mode & !0o077))?;
            changed += 1;
        }
        if meta.is_dir() {
            for e in fs::read_dir(&p)? {
                stack.push(e?.path());
            }
        }
    }
    Ok(changed)
}

/// Syncs a directory so renames and unlinks in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `bytes` to a temporary sibling, fsyncs it and renames it over `path`,
/// then syncs the directory. The file is created 0600.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::blocking::off_worker(|| {
        write_synced_tmp(path, bytes)?;
        sync_dir(parent_of(path))
    })
}

/// Like [`atomic_write`] but leaves the directory sync to the caller, so a
/// batch of renames in one directory pays for one directory sync.
pub fn write_synced_tmp(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let parent = parent_of(path);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "state path has no name"))?;
    let tmp = parent.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// What reading a JSON state file found.
#[derive(Debug)]
pub enum Loaded<T> {
    Missing,
    Ok(T),
    /// The file exists but cannot be read or parsed; callers take their
    /// fail-safe path and never overwrite it silently.
    Unreadable(String),
}

/// Reads a JSON state file.
pub fn load_json<T: DeserializeOwned>(path: &Path) -> Loaded<T> {
    match fs::read(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Loaded::Missing,
        Err(e) => Loaded::Unreadable(e.to_string()),
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(v) => Loaded::Ok(v),
            Err(e) => Loaded::Unreadable(e.to_string()),
        },
    }
}

/// Serializes and atomically writes a JSON state file.
pub fn save_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    atomic_write(path, &bytes)
}

/// A JSON state file held in memory, with what reading it found.
///
/// A file that cannot be read or parsed at start is *unreadable*: the
/// value is the caller's fail-safe, the service reports it (readiness, its
/// refusals), and nothing is ever saved over the file until the owner
/// repairs it and the service restarts.
#[derive(Debug, Clone)]
pub struct Guarded<T> {
    path: std::path::PathBuf,
    value: T,
    unreadable: Option<String>,
}

/// Why a guarded file was not saved.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The file was unreadable at start; it is kept as it is.
    #[error("the file could not be read at start and is not overwritten")]
    Unreadable,
    #[error("could not write the file: {0}")]
    Write(#[from] io::Error),
}

impl<T: Serialize + DeserializeOwned> Guarded<T> {
    /// Reads `path`: a missing file holds `fresh()`, an unreadable one
    /// `fail_safe()`, marked unreadable.
    pub fn load(
        path: impl Into<std::path::PathBuf>,
        fresh: impl FnOnce() -> T,
        fail_safe: impl FnOnce() -> T,
    ) -> Self {
        let path = path.into();
        let (value, unreadable) = match load_json::<T>(&path) {
            Loaded::Missing => (fresh(), None),
            Loaded::Ok(v) => (v, None),
            Loaded::Unreadable(e) => (fail_safe(), Some(e)),
        };
        Guarded {
            path,
            value,
            unreadable,
        }
    }

    /// What was wrong with the file at start, when it was unreadable.
    pub fn unreadable(&self) -> Option<&str> {
        self.unreadable.as_deref()
    }

    pub fn value(&self) -> &T {
        &self.value
    }

    /// The owner's deliberate new value, whatever the file held: an
    /// unreadable file is first moved aside (kept byte for byte), then the
    /// value is written and the guard reads as readable again.
    pub fn replace(&mut self, value: T) -> Result<(), GuardError> {
        if self.unreadable.is_some() {
            match move_aside(&self.path) {
                Ok(_) => {}
                // Someone moved it already: nothing left to keep.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        save_json(&self.path, &value)?;
        self.value = value;
        self.unreadable = None;
        Ok(())
    }
}

/// Reads as the value. There is no `DerefMut`: every change goes through
/// [`Guarded::update`] (or [`Guarded::replace`]), so memory never holds a
/// change the file does not.
impl<T> std::ops::Deref for Guarded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// Why a change to a guarded file did not happen: the change refused, or
/// the file could not be saved.
#[derive(Debug)]
pub enum Refused<E> {
    Change(E),
    Guard(GuardError),
}

impl<T: Serialize + DeserializeOwned + Clone> Guarded<T> {
    /// Changes a copy, saves it (atomic rename after fsync), and only then
    /// keeps it: a failed write leaves memory as the file is.
    pub fn update<R>(&mut self, change: impl FnOnce(&mut T) -> R) -> Result<R, GuardError> {
        self.try_update(|next| Ok::<R, std::convert::Infallible>(change(next)))
            .map_err(|e| match e {
                Refused::Guard(e) => e,
                Refused::Change(never) => match never {},
            })
    }

    /// [`Guarded::update`] for a change that may refuse: a refusal keeps
    /// memory and the file as they were, and nothing is written.
    pub fn try_update<R, E>(
        &mut self,
        change: impl FnOnce(&mut T) -> Result<R, E>,
    ) -> Result<R, Refused<E>> {
        self.try_update_when(|next| change(next).map(|out| (out, true)))
    }

    /// [`Guarded::try_update`] for a change that may turn out to change
    /// nothing: when it says so (`false`), its copy is dropped and nothing
    /// is written.
    pub fn try_update_when<R, E>(
        &mut self,
        change: impl FnOnce(&mut T) -> Result<(R, bool), E>,
    ) -> Result<R, Refused<E>> {
        if self.unreadable.is_some() {
            return Err(Refused::Guard(GuardError::Unreadable));
        }
        let mut next = self.value.clone();
        let (out, changed) = change(&mut next).map_err(Refused::Change)?;
        if changed {
            save_json(&self.path, &next).map_err(|e| Refused::Guard(e.into()))?;
            self.value = next;
        }
        Ok(out)
    }
}

/// Moves an unreadable file aside (`NAME.unreadable-<ms>`) so it is kept for
/// inspection and a fresh one can start.
pub fn move_aside(path: &Path) -> io::Result<std::path::PathBuf> {
    let aside = path.with_extension(format!("unreadable-{}", crate::now_ms()));
    fs::rename(path, &aside)?;
    Ok(aside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_guarded_file_is_never_saved_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("book.json");
        std::fs::write(&p, b"{not json").expect("write");
        let mut g = Guarded::<Vec<u32>>::load(&p, Vec::new, || vec![0]);
        assert!(g.unreadable().is_some());
        assert_eq!(g.value(), &vec![0]);
        assert!(matches!(
            g.update(|v| v.push(1)),
            Err(GuardError::Unreadable)
        ));
        assert_eq!(std::fs::read(&p).expect("read"), b"{not json");
    }

    #[test]
    fn a_refused_or_unwritten_change_leaves_memory_as_the_file_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("book.json");
        let mut g = Guarded::<Vec<u32>>::load(&p, Vec::new, Vec::new);
        g.update(|v| v.push(1)).expect("saved");
        let refused = g.try_update(|v| {
            v.push(2);
            Err::<(), _>("no")
        });
        assert!(matches!(refused, Err(Refused::Change("no"))));
        assert_eq!(g.value(), &vec![1]);
        // The folder is gone: the write fails, and memory keeps the file's value.
        drop(dir);
        assert!(g.update(|v| v.push(3)).is_err());
        assert_eq!(g.value(), &vec![1]);
    }

    #[test]
    fn a_deliberate_replace_keeps_the_unreadable_file_aside_byte_for_byte() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("settings.json");
        std::fs::write(&p, b"{not json").expect("write");
        let mut g = Guarded::<Vec<u32>>::load(&p, Vec::new, || vec![0]);
        g.replace(vec![7]).expect("replaced");
        assert!(g.unreadable().is_none());
        assert_eq!(
            Guarded::<Vec<u32>>::load(&p, Vec::new, Vec::new).value(),
            &vec![7]
        );
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".unreadable-"))
            .collect();
        assert_eq!(aside.len(), 1, "the unreadable file is kept aside");
        assert_eq!(std::fs::read(aside[0].path()).expect("read"), b"{not json");
        g.update(|v| v.push(8)).expect("an ordinary update after");
    }

    #[test]
    fn a_guarded_update_is_kept_only_once_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("book.json");
        let mut g = Guarded::<Vec<u32>>::load(&p, Vec::new, Vec::new);
        assert!(g.unreadable().is_none());
        g.update(|v| v.push(1)).expect("saved");
        assert_eq!(
            Guarded::<Vec<u32>>::load(&p, Vec::new, Vec::new).value(),
            &vec![1]
        );
        // A write that fails (its folder gone) leaves memory as the file was.
        let gone = dir.path().join("gone").join("book.json");
        let mut g = Guarded::<Vec<u32>>::load(&gone, Vec::new, Vec::new);
        assert!(matches!(g.update(|v| v.push(2)), Err(GuardError::Write(_))));
        assert!(g.value().is_empty());
    }

    #[test]
    fn atomic_write_replaces_and_is_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("s.json");
        atomic_write(&p, b"one").expect("write");
        atomic_write(&p, b"two").expect("write");
        assert_eq!(fs::read(&p).expect("read"), b"two");
        let mode = fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .expect("ls")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn unreadable_json_is_reported_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("s.json");
        fs::write(&p, b"{not json").expect("write");
        match load_json::<serde_json::Value>(&p) {
            Loaded::Unreadable(_) => {}
            other => panic!("expected unreadable, got {other:?}"),
        }
        assert_eq!(fs::read(&p).expect("read"), b"{not json");
    }
}
