//! Landing review records.
//!
//! A candidate is the exact committed change a seat submitted: the patch
//! bytes are stored content-addressed (`mailbox/patches/<sha256>.patch`,
//! written and synced before the record that names them), and the record
//! in `mailbox/reviews.json` (atomic rename) names its author seat, the
//! reviewer seat it was routed to, checkout, HEAD, base, patch-id and state.

use std::path::Path;
use std::process::Stdio;

use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::landing::{ReviewState, Verdict};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FindingRec {
    pub text: String,
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub line: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CandidateRec {
    pub candidate_id: String,
    pub project_id: String,
    pub author_seat: String,
    pub author_hire: String,
    pub reviewer_seat: String,
    pub checkout: String,
    pub head: String,
    pub base: String,
    pub patch_id: String,
    pub patch_sha256: String,
    pub summary: String,
    #[serde(default)]
    pub issue: String,
    #[serde(default)]
    pub evidence: String,
    pub state: ReviewState,
    #[serde(default)]
    pub findings: Vec<FindingRec>,
    #[serde(default)]
    pub verdict_summary: String,
    #[serde(default)]
    pub previous: String,
    pub created_at_ms: i64,
    #[serde(default)]
    pub decided_at_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewBook {
    pub version: u32,
    pub candidates: Vec<CandidateRec>,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A git object name or patch-id: 40 or 64 lowercase hex digits.
pub fn is_object_name(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `git patch-id --stable` of `patch`, run outside any repository (in
/// `dir`, with discovery stopped there), so nothing but the bytes decides.
pub async fn patch_id(patch: &[u8], dir: &Path) -> Result<String, ClankieError> {
    use tokio::io::AsyncWriteExt as _;
    let unavailable =
        |e: String| ErrorCode::ServiceUnavailable.err(format!("git patch-id could not run: {e}"));
    let mut child = tokio::process::Command::new("git")
        .args(["patch-id", "--stable"])
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| unavailable(e.to_string()))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| unavailable("no stdin".into()))?;
    let bytes = patch.to_vec();
    let feed = tokio::spawn(async move {
        let _ = stdin.write_all(&bytes).await;
    });
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    let _ = feed.await;
    let unnamed = || {
        ErrorCode::InvalidArgument
            .err("the patch is not one change git can name; nothing was stored")
    };
    if !out.status.success() {
        return Err(unnamed());
    }
    // A patch with `commit` lines inside splits into several ids: the
    // candidate must be exactly one change.
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let id = lines
        .next()
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("")
        .to_string();
    if lines.next().is_some() || !is_object_name(&id) {
        return Err(unnamed());
    }
    Ok(id)
}

/// The canonical checkout when it lies inside one of `workspaces`
/// (both with symlinks resolved).
pub fn inside_workspaces(
    checkout: &str,
    workspaces: &[crate::state::store::WorkspaceRec],
) -> Result<String, ClankieError> {
    let outside = || {
        ErrorCode::InvalidArgument.err(
            "the checkout is not inside one of the project's registered workspaces; nothing was stored",
        )
    };
    let real = std::fs::canonicalize(checkout).map_err(|_| outside())?;
    workspaces
        .iter()
        .filter_map(|w| std::fs::canonicalize(&w.path).ok())
        .any(|w| real.starts_with(&w))
        .then(|| real.display().to_string())
        .ok_or_else(outside)
}

/// How many undecided candidates one seat may hold: with the 4 MiB patch
/// quota, at most 64 MiB of patches per seat waiting for a verdict.
pub const MAX_PENDING_PER_SEAT: usize = 16;

impl ReviewBook {
    /// Candidates of `seat` still waiting for a verdict.
    pub fn pending_of(&self, seat: &str) -> usize {
        self.candidates
            .iter()
            .filter(|c| c.author_seat == seat && c.state == ReviewState::Pending)
            .count()
    }

    pub fn get(&self, id: &str) -> Option<&CandidateRec> {
        self.candidates.iter().find(|c| c.candidate_id == id)
    }

    /// The latest candidate of the same project and issue that got CHANGES:
    /// a new submission for that issue links to it.
    pub fn previous_for(&self, project_id: &str, issue: &str) -> String {
        if issue.is_empty() {
            return String::new();
        }
        self.candidates
            .iter()
            .rev()
            .find(|c| {
                c.project_id == project_id && c.issue == issue && c.state == ReviewState::Changes
            })
            .map(|c| c.candidate_id.clone())
            .unwrap_or_default()
    }
}

/// Checks a verdict's shape; who may give it is checked by the caller.
pub fn check_verdict(
    candidate: &CandidateRec,
    patch_id: &str,
    verdict: Verdict,
    findings: &[FindingRec],
) -> Result<(), (clankie_runtime::ErrorCode, String)> {
    use clankie_runtime::ErrorCode;
    if candidate.state != ReviewState::Pending {
        return Err((
            ErrorCode::InvalidArgument,
            format!(
                "candidate {} was already decided ({})",
                candidate.candidate_id, candidate.state
            ),
        ));
    }
    if patch_id != candidate.patch_id {
        return Err((
            ErrorCode::PatchMismatch,
            format!(
                "the verdict names patch-id {patch_id}; candidate {} is patch-id {}",
                candidate.candidate_id, candidate.patch_id
            ),
        ));
    }
    match verdict {
        Verdict::Approve => Ok(()),
        Verdict::Changes if findings.iter().any(|f| !f.text.trim().is_empty()) => Ok(()),
        Verdict::Changes => Err((
            ErrorCode::InvalidArgument,
            "changes needs at least one concrete finding".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate() -> CandidateRec {
        CandidateRec {
            candidate_id: "c1".into(),
            project_id: "p".into(),
            author_seat: "a".into(),
            author_hire: "h".into(),
            reviewer_seat: "r".into(),
            checkout: "/x".into(),
            head: "1".repeat(40),
            base: "2".repeat(40),
            patch_id: "3".repeat(40),
            patch_sha256: "4".repeat(64),
            summary: "s".into(),
            issue: "LOCAL-1".into(),
            evidence: String::new(),
            state: ReviewState::Pending,
            findings: Vec::new(),
            verdict_summary: String::new(),
            previous: String::new(),
            created_at_ms: 0,
            decided_at_ms: 0,
        }
    }

    #[test]
    fn a_candidate_reads_and_writes_back_as_the_file_spells_it() {
        for state in ["pending", "approved", "changes"] {
            let mut disk = serde_json::to_value(candidate()).expect("json");
            disk["state"] = state.into();
            let c: CandidateRec = serde_json::from_value(disk.clone()).expect("reads");
            assert_eq!(c.state.as_str(), state);
            assert_eq!(serde_json::to_value(&c).expect("writes"), disk);
        }
        let mut odd = serde_json::to_value(candidate()).expect("json");
        odd["state"] = "maybe".into();
        assert!(serde_json::from_value::<CandidateRec>(odd).is_err());
    }

    #[test]
    fn verdicts_need_the_patch_read_and_changes_need_a_finding() {
        let c = candidate();
        let pid = "3".repeat(40);
        assert!(check_verdict(&c, &pid, Verdict::Approve, &[]).is_ok());
        assert_eq!(
            check_verdict(&c, &"9".repeat(40), Verdict::Approve, &[]).map_err(|e| e.0),
            Err(clankie_runtime::ErrorCode::PatchMismatch)
        );
        assert!(check_verdict(&c, &pid, Verdict::Changes, &[]).is_err());
        let f = FindingRec {
            text: "off by one".into(),
            file: "a.rs".into(),
            line: 3,
        };
        assert!(check_verdict(&c, &pid, Verdict::Changes, &[f]).is_ok());
        let mut done = c.clone();
        done.state = ReviewState::Approved;
        assert!(check_verdict(&done, &pid, Verdict::Approve, &[]).is_err());
        let mut book = ReviewBook::default();
        let mut changed = c.clone();
        changed.state = ReviewState::Changes;
        book.candidates.push(changed);
        assert_eq!(book.previous_for("p", "LOCAL-1"), "c1");
        assert_eq!(book.previous_for("p", ""), "");
        assert!(is_object_name(&"a".repeat(40)) && !is_object_name("HEAD"));
    }
}
