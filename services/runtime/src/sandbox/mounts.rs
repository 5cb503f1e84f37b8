//! The mounts of one sandbox, in the order bubblewrap makes them: later
//! mounts sit on top of earlier ones.
//!
//! 1. The root, read-only (bubblewrap remounts every submount read-only too:
//!    `/sys`, cgroups, every other filesystem).
//! 2. A fresh `/dev`: the null, zero, random and tty nodes, a private
//!    `devpts` for terminals the hire opens itself, and the hire's own
//!    terminal as `/dev/console`; no other terminal of the owner's.
//! 3. `/proc` of the hire's own pid namespace, with every entry that is not
//!    a process (`/proc/sys`, `sysrq-trigger`, ...) read-only: a stack run
//!    as root is root inside too, and needs no capability to write a sysctl.
//! 4. Private, empty `/tmp`, `/var/tmp` and `/run`: the owner's temporary
//!    files, sockets and multiplexer servers there are absent. The folder
//!    `/etc/resolv.conf` points into under `/run` comes back read-only.
//! 5. The writable folders: the workspace, its git metadata, the profiles.
//! 6. Ancestors of a cover that lie inside a writable folder, each bound
//!    onto itself: a mount point cannot be renamed (`EBUSY`), so a covered
//!    file cannot be given a path the covers do not name.
//! 7. What the services run later, read-only again, over any writable
//!    folder or private tmpfs that holds it.
//! 8. The covers: the state folder and the hidden folders become empty
//!    tmpfs folders; a hidden file is covered by `/dev/null` on a no-device
//!    mount, so it cannot be opened.
//! 9. `run/fleet/`, read-only: the gateway's local MCP socket and its
//!    discovery file, the one part of the state the hire keeps.

use std::path::{Path, PathBuf};

use super::reach::Reach;

/// Folders every sandbox gets private and empty, where they exist.
const PRIVATE: [&str; 3] = ["/tmp", "/var/tmp", "/run"];

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn by_depth(mut v: Vec<PathBuf>) -> Vec<PathBuf> {
    v.sort_by_key(|p| p.components().count());
    v.dedup();
    v
}

/// Every entry of `proc` that is not a process: folders, and files with a
/// write bit. Read from the host's `/proc` when the sandbox is built, so a
/// kernel's new entry is covered without a release.
pub(super) fn proc_entries(proc: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(entries) = std::fs::read_dir(proc) else {
        return vec![proc.join("sys")];
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            !e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            e.path()
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir() || (m.is_file() && m.permissions().mode() & 0o222 != 0))
        })
        .map(|e| Path::new("/proc").join(e.file_name()))
        .collect();
    out.sort();
    out
}

/// The folder under `/run` that `/etc/resolv.conf` resolves into, if any:
/// the hire needs names for its model provider.
fn resolver_dir() -> Option<PathBuf> {
    let real = std::fs::canonicalize("/etc/resolv.conf").ok()?;
    real.starts_with("/run")
        .then(|| real.parent().map(Path::to_path_buf))
        .flatten()
}

/// The bubblewrap mount flags for `r`.
pub(super) fn flags(r: &Reach) -> Vec<String> {
    let mut f: Vec<String> = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        .map(String::from)
        .to_vec();
    for entry in proc_entries(Path::new("/proc")) {
        f.extend(["--ro-bind".into(), s(&entry), s(&entry)]);
    }
    for dir in PRIVATE.map(Path::new) {
        let real_dir = dir.symlink_metadata().is_ok_and(|m| m.is_dir());
        if real_dir {
            f.extend(["--tmpfs".into(), s(dir)]);
        }
    }
    if let Some(dir) = resolver_dir() {
        f.extend(["--ro-bind".into(), s(&dir), s(&dir)]);
    }
    let writable = by_depth(r.writable.iter().filter(|w| w.is_dir()).cloned().collect());
    for w in &writable {
        f.extend(["--bind".into(), s(w), s(w)]);
    }
    let covered: Vec<&PathBuf> = std::iter::once(&r.state_root)
        .chain(&r.hidden_dirs)
        .chain(&r.hidden_files)
        .collect();
    let pins: Vec<PathBuf> = covered
        .iter()
        .flat_map(|c| c.ancestors().skip(1))
        .filter(|a| writable.iter().any(|w| a.starts_with(w) && a != w) && a.is_dir())
        .map(Path::to_path_buf)
        .collect();
    for a in by_depth(pins) {
        f.extend(["--bind".into(), s(&a), s(&a)]);
    }
    for d in by_depth(r.read_only.iter().filter(|d| d.is_dir()).cloned().collect()) {
        f.extend(["--ro-bind".into(), s(&d), s(&d)]);
    }
    f.extend(["--tmpfs".into(), s(&r.state_root)]);
    for d in r.hidden_dirs.iter().filter(|d| d.is_dir()) {
        f.extend(["--tmpfs".into(), s(d)]);
    }
    for file in r.hidden_files.iter().filter(|p| p.exists() && !p.is_dir()) {
        f.extend(["--ro-bind".into(), "/dev/null".into(), s(file)]);
    }
    f.extend(["--ro-bind".into(), s(&r.fleet_dir), s(&r.fleet_dir)]);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(flags: &[String], needle: &[&str]) -> Option<usize> {
        flags
            .windows(needle.len())
            .position(|w| w.iter().zip(needle).all(|(a, b)| a == b))
    }

    #[test]
    fn the_root_is_read_only_and_only_the_named_folders_are_writable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("ws");
        let profile = dir.path().join("profile");
        for d in [&ws, &profile] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let r = Reach {
            state_root: "/home/o/.clankie".into(),
            fleet_dir: "/home/o/.clankie/run/fleet".into(),
            writable: vec![ws.clone(), profile.clone()],
            ..Default::default()
        };
        let f = flags(&r);
        assert_eq!(f[..3], ["--ro-bind", "/", "/"]);
        assert!(position(&f, &["--dev", "/dev"]).is_some());
        assert!(position(&f, &["--tmpfs", "/tmp"]).is_some());
        assert!(!f.iter().any(|x| x == "--dev-bind"), "no host device");
        let binds: Vec<&String> = f
            .windows(2)
            .filter(|w| w[0] == "--bind")
            .map(|w| &w[1])
            .collect();
        assert_eq!(binds, vec![&s(&ws), &s(&profile)]);
        // /proc/sys is read-only on top of the sandbox's own /proc.
        let proc = position(&f, &["--proc", "/proc"]).expect("proc");
        let sys = position(&f, &["--ro-bind", "/proc/sys", "/proc/sys"]).expect("sys");
        assert!(proc < sys);
    }

    #[test]
    fn covers_come_after_the_writable_folders_and_the_fleet_folder_last() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("ws");
        let state = ws.join("deep/state");
        let bin = ws.join("target/debug");
        for d in [&state, &bin] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let r = Reach {
            state_root: state.clone(),
            fleet_dir: state.join("run/fleet"),
            read_only: vec![bin.clone()],
            writable: vec![ws.clone()],
            ..Default::default()
        };
        let f = flags(&r);
        let at = |n: &[&str]| position(&f, n).unwrap_or_else(|| panic!("{n:?} in {f:?}"));
        let w = at(&["--bind", &s(&ws), &s(&ws)]);
        let pin = at(&["--bind", &s(&ws.join("deep")), &s(&ws.join("deep"))]);
        let ro = at(&["--ro-bind", &s(&bin), &s(&bin)]);
        let cover = at(&["--tmpfs", &s(&state)]);
        let fleet = at(&["--ro-bind", &s(&state.join("run/fleet"))]);
        assert!(w < pin && pin < ro && ro < cover && cover < fleet, "{f:?}");
        assert_eq!(f.iter().filter(|x| *x == "--bind").count(), 2, "{f:?}");
    }

    #[test]
    fn proc_entries_are_the_non_process_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sys")).expect("mkdir");
        std::fs::create_dir(dir.path().join("1234")).expect("mkdir");
        std::fs::write(dir.path().join("sysrq-trigger"), "").expect("write");
        std::fs::write(dir.path().join("version"), "").expect("write");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(
            dir.path().join("version"),
            std::fs::Permissions::from_mode(0o444),
        )
        .expect("chmod");
        std::os::unix::fs::symlink("1234", dir.path().join("self")).expect("link");
        assert_eq!(
            proc_entries(dir.path()),
            vec![
                PathBuf::from("/proc/sys"),
                PathBuf::from("/proc/sysrq-trigger")
            ]
        );
    }
}
