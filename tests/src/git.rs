//! Real git repositories for the review scenarios.

use std::path::{Path, PathBuf};

/// Runs git in `dir` with a fixed identity; panics on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The exact change from `base` to HEAD, as the bridge reads it.
pub fn diff(dir: &Path, base: &str) -> Vec<u8> {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["diff", "--binary", base, "HEAD"])
        .output()
        .expect("diff")
        .stdout
}

/// `git patch-id --stable` of some patch bytes.
pub fn patch_id_of(patch: &[u8]) -> String {
    use std::io::Write as _;
    let mut child = std::process::Command::new("git")
        .args(["patch-id", "--stable"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("patch-id");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(patch)
        .expect("write");
    let out = child.wait_with_output().expect("patch-id");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string()
}

/// The patch-id of the change from `base` to HEAD.
pub fn patch_id(dir: &Path, base: &str) -> String {
    patch_id_of(&diff(dir, base))
}

/// A work clone of a bare origin, `main` pushed with one commit; returns
/// the work folder and that base commit.
pub fn work_repo(parent: &Path, name: &str) -> (PathBuf, String) {
    let origin = parent.join(format!("{name}-origin.git"));
    let work = parent.join(name);
    git(
        parent,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            &origin.display().to_string(),
        ],
    );
    git(
        parent,
        &[
            "clone",
            "-q",
            &origin.display().to_string(),
            &work.display().to_string(),
        ],
    );
    git(&work, &["checkout", "-q", "-b", "main"]);
    std::fs::write(work.join("README"), "base\n").expect("write");
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "base"]);
    git(&work, &["push", "-q", "origin", "main"]);
    let base = git(&work, &["rev-parse", "HEAD"]);
    (work, base)
}

/// Commits `files` (path, bytes) in `work`; returns the new HEAD.
pub fn commit(work: &Path, files: &[(&str, &[u8])], message: &str) -> String {
    for (path, bytes) in files {
        let p = work.join(path);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        std::fs::write(p, bytes).expect("write");
    }
    git(work, &["add", "."]);
    git(work, &["commit", "-q", "-m", message]);
    git(work, &["rev-parse", "HEAD"])
}
