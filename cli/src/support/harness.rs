//! What every harness launcher shares: finding an executable, running a
//! harness's own CLI with a time bound, merging settings into a profile's
//! JSON file, where an integration's files are, and where a hire's own
//! profile goes by default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clankie_runtime::ErrorCode;
use serde_json::Value;

/// The first `name` on PATH that is a file.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Runs `cmd` to completion within `limit`; its stdout, or why it failed
/// (its first stderr line).
pub async fn run_bounded(
    cmd: &mut tokio::process::Command,
    limit: Duration,
) -> Result<String, String> {
    cmd.kill_on_drop(true);
    let out = tokio::time::timeout(limit, cmd.output())
        .await
        .map_err(|_| format!("no answer within {} s", limit.as_secs()))?
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr)
            .lines()
            .chain(String::from_utf8_lossy(&out.stdout).lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .chars()
            .take(300)
            .collect::<String>();
        return Err(format!("{} ({why})", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// An installed harness CLI: its executable and its release.
#[derive(Debug, Clone)]
pub struct Installed {
    pub bin: PathBuf,
    pub version: String,
}

impl Installed {
    /// `chosen`, else `name` on PATH; its release is word `word` of what
    /// `--version` prints. Refused as `harness_not_installed` when it is
    /// neither found nor runs.
    pub async fn find(name: &str, chosen: Option<&Path>, word: usize) -> anyhow::Result<Installed> {
        let bin = match chosen {
            Some(p) => p.to_path_buf(),
            None => which(name).ok_or_else(|| {
                ErrorCode::HarnessNotInstalled
                    .err(format!("no `{name}` on PATH; pass --{name} PATH"))
            })?,
        };
        let out = run_bounded(
            tokio::process::Command::new(&bin).arg("--version"),
            Duration::from_secs(20),
        )
        .await
        .map_err(|e| {
            ErrorCode::HarnessNotInstalled
                .err(format!("{name} at {} did not run: {e}", bin.display()))
        })?;
        let version = out
            .split_whitespace()
            .nth(word)
            .unwrap_or_default()
            .to_string();
        Ok(Installed { bin, version })
    }

    /// Refuses (`harness_release_unsupported`) a release older than
    /// `oldest`, the oldest the fleet was tested with.
    pub fn accepted(&self, name: &str, oldest: (u64, u64, u64)) -> anyhow::Result<()> {
        match super::pi::parse_version(&self.version) {
            Some(v) if v >= oldest => Ok(()),
            _ => Err(ErrorCode::HarnessReleaseUnsupported
                .err(format!(
                    "{name} {:?} is not {}.{}.{} or newer, the releases the fleet was tested with",
                    self.version, oldest.0, oldest.1, oldest.2
                ))
                .into()),
        }
    }
}

/// `patch` merged into `base`: objects key by key, arrays by adding the
/// elements `base` lacks, anything else replaced.
pub fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (Value::Array(b), Value::Array(p)) => {
            for v in p {
                if !b.contains(v) {
                    b.push(v.clone());
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// Merges `patch` into the JSON file at `path` (created when missing),
/// written whole by atomic rename. A file that is not a JSON object is
/// refused, never overwritten.
pub fn merge_json(path: &Path, patch: &Value) -> anyhow::Result<()> {
    let mut doc = match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice::<Value>(&bytes)
            .ok()
            .filter(Value::is_object)
            .with_context(|| {
                format!("{} is not a JSON object; it was left alone", path.display())
            })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Object(Default::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    merge(&mut doc, patch);
    clankie_runtime::state::atomic_write(path, &serde_json::to_vec_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// An integration's folder: `$ENV`, else `NAME/` beside this binary (a
/// release), else `integrations/NAME` of the source tree it was built
/// from; the one holding `marker`.
pub fn integration_dir(env: &str, name: &str, marker: &str) -> anyhow::Result<PathBuf> {
    if let Ok(dir) = std::env::var(env) {
        return Ok(PathBuf::from(dir));
    }
    let exe = std::env::current_exe().context("where is this binary")?;
    let mut candidates = Vec::new();
    if let Some(bin) = exe.parent() {
        candidates.push(bin.join(name));
    }
    candidates.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../integrations")
            .join(name),
    );
    candidates
        .into_iter()
        .find(|d| d.join(marker).is_file())
        .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
        .with_context(|| {
            format!("the {name} integration ({name}/{marker}) is not beside this binary or in its source tree")
        })
}

/// A fresh folder for one hire's harness profile:
/// `$CLANKIE_PROFILES/<harness>-<id>`, by default under
/// `~/.local/share/clankie/profiles`.
pub fn fresh_profile(harness: &str) -> anyhow::Result<PathBuf> {
    let root = match std::env::var_os("CLANKIE_PROFILES").filter(|v| !v.is_empty()) {
        Some(r) => PathBuf::from(r),
        None => PathBuf::from(std::env::var_os("HOME").context("no HOME for the profiles")?)
            .join(".local/share/clankie/profiles"),
    };
    let dir = root.join(format!(
        "{harness}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    ));
    clankie_runtime::state::private_dir(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_merge_keeps_what_the_owner_set_and_adds_what_the_hire_needs() {
        let mut base = json!({
            "permissions": { "allow": ["Bash(ls)"] },
            "projects": { "/a": { "hasTrustDialogAccepted": false, "x": 1 } },
            "theme": "dark"
        });
        merge(
            &mut base,
            &json!({
                "permissions": { "allow": ["mcp__x", "Bash(ls)"] },
                "projects": { "/a": { "hasTrustDialogAccepted": true } }
            }),
        );
        assert_eq!(
            base,
            json!({
                "permissions": { "allow": ["Bash(ls)", "mcp__x"] },
                "projects": { "/a": { "hasTrustDialogAccepted": true, "x": 1 } },
                "theme": "dark"
            })
        );
    }

    #[test]
    fn a_file_that_is_not_a_json_object_is_left_alone() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("settings.json");
        std::fs::write(&p, "[1, 2").expect("write");
        assert!(merge_json(&p, &json!({"a": 1})).is_err());
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "[1, 2");
        let q = dir.path().join("new.json");
        merge_json(&q, &json!({"a": 1})).expect("created");
        assert_eq!(
            serde_json::from_slice::<Value>(&std::fs::read(&q).expect("read")).expect("json"),
            json!({"a": 1})
        );
    }
}
