//! The git metadata a workspace needs writable beside itself: the `.git`
//! folder of a repository the workspace lies inside, or the folders a
//! linked worktree's `.git` file names.
//!
//! Nothing here runs git: a worker's repository configuration could run
//! commands. The `.git` file and `commondir` are read as text, bounded, and
//! a folder they name counts only when it is git metadata by its name (a
//! `.git` folder, something under one, or a bare `NAME.git`), so a `.git`
//! file that an earlier hire planted cannot make the owner's home writable.

use std::path::{Path, PathBuf};

/// The most a `.git` or `commondir` file may hold.
const MAX_POINTER: u64 = 4096;

/// The git metadata folders outside `workspace` that its repository writes
/// to (empty when `.git` sits in the workspace itself, or there is none).
pub fn metadata_dirs(workspace: &Path) -> Vec<PathBuf> {
    let Some((holder, dot_git)) = workspace
        .ancestors()
        .map(|d| (d, d.join(".git")))
        .find(|(_, g)| g.symlink_metadata().is_ok())
    else {
        return Vec::new();
    };
    let mut dirs = Vec::new();
    if dot_git.is_dir() {
        if holder != workspace {
            dirs.push(dot_git);
        }
    } else if let Some(gitdir) = pointer(&dot_git, "gitdir:").map(|p| resolve(holder, &p)) {
        if let Some(common) = pointer(&gitdir.join("commondir"), "") {
            dirs.push(resolve(&gitdir, &common));
        }
        dirs.push(gitdir);
    }
    dirs.into_iter()
        .filter_map(|d| std::fs::canonicalize(&d).ok())
        .filter(|d| d.is_dir() && is_git_metadata(d) && !d.starts_with(workspace))
        .collect()
}

/// The path a small pointer file names after `prefix`, trimmed.
fn pointer(file: &Path, prefix: &str) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(file)
        .ok()?
        .take(MAX_POINTER)
        .read_to_string(&mut text)
        .ok()?;
    let rest = text.lines().next()?.strip_prefix(prefix)?.trim();
    (!rest.is_empty()).then(|| PathBuf::from(rest))
}

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// A `.git` folder, a folder under one, or a bare repository `NAME.git`.
fn is_git_metadata(dir: &Path) -> bool {
    dir.components().any(|c| {
        let s = c.as_os_str().to_string_lossy();
        s == ".git" || (s.ends_with(".git") && s.len() > 4)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(p: &Path) -> PathBuf {
        std::fs::canonicalize(p).expect("canonical")
    }

    #[test]
    fn a_repository_folder_needs_nothing_more_and_a_subfolder_gets_its_dot_git() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = canon(dir.path());
        std::fs::create_dir_all(repo.join(".git")).expect("mkdir");
        std::fs::create_dir_all(repo.join("app")).expect("mkdir");
        assert!(metadata_dirs(&repo).is_empty());
        assert_eq!(metadata_dirs(&repo.join("app")), vec![repo.join(".git")]);
    }

    #[test]
    fn a_linked_worktree_gets_its_gitdir_and_the_common_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = canon(dir.path());
        let common = root.join("main/.git");
        let gitdir = common.join("worktrees/feature");
        std::fs::create_dir_all(&gitdir).expect("mkdir");
        std::fs::write(gitdir.join("commondir"), "../..\n").expect("write");
        let tree = root.join("feature");
        std::fs::create_dir_all(&tree).expect("mkdir");
        std::fs::write(tree.join(".git"), format!("gitdir: {}\n", gitdir.display()))
            .expect("write");
        assert_eq!(metadata_dirs(&tree), vec![common, gitdir]);
    }

    #[test]
    fn a_planted_pointer_to_a_folder_that_is_not_git_metadata_counts_for_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = canon(dir.path());
        let home = root.join("home");
        std::fs::create_dir_all(&home).expect("mkdir");
        let tree = root.join("ws");
        std::fs::create_dir_all(&tree).expect("mkdir");
        std::fs::write(tree.join(".git"), format!("gitdir: {}\n", home.display())).expect("write");
        assert!(metadata_dirs(&tree).is_empty());
        std::fs::write(tree.join(".git"), "gitdir: ../home\n").expect("write");
        assert!(metadata_dirs(&tree).is_empty());
    }
}
