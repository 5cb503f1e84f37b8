//! `submit_for_review` from the seat's side: reading the exact committed
//! change of a checkout and submitting it over the gateway's local socket.
//!
//! The change is `git diff --binary` from the merge base with `origin/main`
//! (or a given base) to HEAD of the absolute checkout named, resolved to its
//! work-tree root. The bridge's own working folder is never read. A missing,
//! relative or non-git checkout is refused before anything is sent.

use std::path::Path;
use std::process::{Command, Stdio};

use base64::Engine as _;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::args::{Submission, SubmitArgs};
use clankie_types::fleet::seat::SeatRoute;
use serde_json::{Value, json};

use super::gateway::{encode, seat_answer};

/// A change read from a checkout.
pub struct Change {
    pub root: String,
    pub head: String,
    pub base: String,
    pub patch_id: String,
    pub patch: Vec<u8>,
}

pub(crate) fn git(dir: &str, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, String> {
    use std::io::Write as _;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git could not start: {e}"))?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(bytes)
            .map_err(|e| format!("git stdin: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// Runs git and reads at most `cap` bytes of its output: a change larger
/// than the candidate quota is refused without being loaded whole.
pub(crate) fn git_capped(dir: &str, args: &[&str], cap: usize) -> Result<Vec<u8>, ClankieError> {
    let bad = |m: String| ErrorCode::InvalidArgument.err(m);
    use std::io::Read as _;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| bad(format!("git could not start: {e}")))?;
    let mut out = Vec::new();
    let read = child
        .stdout
        .take()
        .ok_or_else(|| bad("git gave no output pipe".to_string()))?
        .take(cap as u64 + 1)
        .read_to_end(&mut out);
    if out.len() > cap {
        let _ = child.kill();
        let _ = child.wait();
        return Err(ErrorCode::PayloadTooLarge.err(format!(
            "the change is larger than the {} MiB review quota",
            cap >> 20
        )));
    }
    read.map_err(|e| bad(format!("git output: {e}")))?;
    let status = child.wait().map_err(|e| bad(format!("git: {e}")))?;
    if !status.success() {
        return Err(bad(format!("git {} failed", args.first().unwrap_or(&""))));
    }
    Ok(out)
}

pub(crate) fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// Reads the committed change of the checkout at `checkout`.
pub fn read_change(checkout: &str, base: Option<&str>) -> Result<Change, ClankieError> {
    let bad = |m: String| ErrorCode::InvalidArgument.err(m);
    if !Path::new(checkout).is_absolute() {
        return Err(bad(format!(
            "the checkout must be an absolute path, not {checkout:?}"
        )));
    }
    if !Path::new(checkout).is_dir() {
        return Err(bad(format!("no such checkout folder: {checkout}")));
    }
    let root = text(
        git(checkout, &["rev-parse", "--show-toplevel"], None)
            .map_err(|_| bad(format!("{checkout} is not inside a git checkout")))?,
    );
    let head = text(git(&root, &["rev-parse", "--verify", "HEAD^{commit}"], None).map_err(bad)?);
    let base = match base.filter(|b| !b.is_empty()) {
        Some(b) => text(
            git(
                &root,
                &["rev-parse", "--verify", &format!("{b}^{{commit}}")],
                None,
            )
            .map_err(bad)?,
        ),
        None => text(
            git(&root, &["merge-base", "origin/main", "HEAD"], None)
                .map_err(|e| bad(format!("no merge base with origin/main ({e}); pass base")))?,
        ),
    };
    let patch = git_capped(
        &root,
        &["diff", "--binary", &base, &head],
        clankie_runtime::limits::MAX_CANDIDATE_PATCH,
    )?;
    if patch.is_empty() {
        return Err(bad(format!(
            "no committed change between {base} and HEAD {head}"
        )));
    }
    let id = text(git(&root, &["patch-id", "--stable"], Some(&patch)).map_err(bad)?);
    let patch_id = id.split_whitespace().next().unwrap_or("").to_string();
    if patch_id.is_empty() {
        return Err(bad("git patch-id gave no id for this change".into()));
    }
    Ok(Change {
        root,
        head,
        base,
        patch_id,
        patch,
    })
}

/// Reads the change and submits it for this pane's seat. Returns the
/// candidate, or a refusal `{error: {code, message}}`.
pub async fn submit(socket: &str, pane: &str, args: &Value) -> Result<Value, Value> {
    let refused =
        |code: &str, message: String| json!({ "error": { "code": code, "message": message } });
    let args: SubmitArgs = serde_json::from_value(args.clone()).map_err(|e| {
        refused(
            ErrorCode::ArgumentsInvalid.as_str(),
            format!("submit_for_review arguments: {e}"),
        )
    })?;
    let checkout = args.checkout.clone();
    let base = args.base.clone().unwrap_or_default();
    let change = tokio::task::spawn_blocking(move || read_change(&checkout, Some(&base)))
        .await
        .map_err(|e| refused("internal", e.to_string()))?
        .map_err(|e| {
            refused(
                e.code.as_str(),
                format!("{}; nothing was stored", e.message),
            )
        })?;
    let body = json!(Submission {
        checkout: change.root,
        head: change.head,
        base: change.base,
        patch_id: change.patch_id,
        patch: base64::engine::general_purpose::STANDARD.encode(&change.patch),
        summary: args.summary,
        issue: args.issue.unwrap_or_default(),
        evidence: args.evidence.unwrap_or_default(),
    });
    let path = SeatRoute::ReviewCandidates.path(&encode(pane));
    seat_answer(socket, "POST", &path, Some(body), "nothing was submitted").await
}
