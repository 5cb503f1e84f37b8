//! Pi as a harness: which Pi package is installed and whether its release
//! is accepted, where the worker extension is, and the pane command that
//! starts Pi with it.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The npm package the Pi coding agent ships as.
pub const PACKAGE: &str = "@earendil-works/pi-coding-agent";

/// Releases older than this are refused without probing.
pub const OLDEST: (u64, u64, u64) = (0, 87, 1);

/// An installed Pi package.
#[derive(Debug, Clone)]
pub struct PiPackage {
    /// The package folder (holds `package.json`).
    pub dir: PathBuf,
    pub version: String,
    /// The CLI script `pi` runs.
    pub cli: PathBuf,
}

impl PiPackage {
    /// The package `pi` (an executable, a symlink to one, or the package
    /// folder itself) belongs to; `None` means `pi` on PATH.
    pub fn find(pi: Option<&Path>) -> anyhow::Result<PiPackage> {
        let start = match pi {
            Some(p) => p.to_path_buf(),
            None => super::harness::which("pi").context("no `pi` on PATH; pass --pi PATH")?,
        };
        let real = std::fs::canonicalize(&start)
            .with_context(|| format!("{} does not exist", start.display()))?;
        let mut dir = if real.is_dir() {
            Some(real.as_path())
        } else {
            real.parent()
        };
        while let Some(d) = dir {
            let manifest = d.join("package.json");
            if let Ok(text) = std::fs::read_to_string(&manifest)
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
                && v["name"] == PACKAGE
            {
                let version = v["version"].as_str().unwrap_or("").to_string();
                let bin = match &v["bin"] {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Object(m) => m
                        .get("pi")
                        .and_then(|b| b.as_str())
                        .unwrap_or("")
                        .to_string(),
                    _ => String::new(),
                };
                if bin.is_empty() {
                    bail!("{} names no `pi` executable", manifest.display());
                }
                return Ok(PiPackage {
                    dir: d.to_path_buf(),
                    version,
                    cli: d.join(bin),
                });
            }
            dir = d.parent();
        }
        bail!("{} is not part of an installed {PACKAGE}", start.display())
    }

    /// Whether the release is one the worker extension accepts.
    pub fn accepted(&self) -> Result<(), String> {
        match parse_version(&self.version) {
            Some(v) if v >= OLDEST => Ok(()),
            Some(_) => Err(format!(
                "Pi {} is older than {}.{}.{}, the oldest release the worker accepts; it was not probed",
                self.version, OLDEST.0, OLDEST.1, OLDEST.2
            )),
            None => Err(format!(
                "Pi's manifest names no release version ({:?}); it was not probed",
                self.version
            )),
        }
    }
}

/// `MAJOR.MINOR.PATCH` (a pre-release suffix is ignored).
pub fn parse_version(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.trim().split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let v = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(v)
}

/// The worker extension's folder: beside the binaries in a release
/// (`pi-worker/`), else in the source tree this binary was built from.
pub fn worker_dir() -> anyhow::Result<PathBuf> {
    super::harness::integration_dir("CLANKIE_PI_WORKER_DIR", "pi-worker", "worker.mjs")
}

/// Pi's profile folder, where it keeps its settings and sessions:
/// `PI_CODING_AGENT_DIR`, else `~/.pi/agent`, when it exists.
pub fn profile_dir() -> Option<PathBuf> {
    std::env::var_os("PI_CODING_AGENT_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pi/agent")))
        .filter(|d| d.is_dir())
}

/// The selected Node: `--node PATH`, else `node` on PATH.
pub fn node(chosen: Option<&Path>) -> anyhow::Result<PathBuf> {
    match chosen {
        Some(p) => Ok(p.to_path_buf()),
        None => {
            super::harness::which("node").context("no `node` on PATH; pass --node PATH (Node 22)")
        }
    }
}

/// What the hire needs to start Pi in its pane.
pub struct Launch<'a> {
    pub node: &'a Path,
    pub package: &'a PiPackage,
    pub worker: &'a Path,
    pub model: Option<&'a str>,
    pub pi_args: &'a [String],
}

/// The pane command: `env` with the prepared settings, then the selected
/// Node running Pi with the worker extension. The caller's Pi profile
/// (`PI_CODING_AGENT_DIR`) and home travel with it, so the worker runs
/// the Pi its owner configured.
pub fn pane_command(l: &Launch) -> anyhow::Result<Vec<String>> {
    let clankie = std::env::current_exe().context("where is this binary")?;
    let node_dir = l.node.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = match std::env::var_os("PATH") {
        Some(p) => {
            let mut all = vec![node_dir];
            all.extend(std::env::split_paths(&p));
            std::env::join_paths(all).context("PATH")?
        }
        None => node_dir.into_os_string(),
    };
    let mut cmd = vec![
        "env".to_string(),
        format!("PATH={}", path.to_string_lossy()),
        format!("CLANKIE_BIN={}", clankie.display()),
        "PI_OFFLINE=1".to_string(),
        "PI_TELEMETRY=0".to_string(),
    ];
    for key in ["PI_CODING_AGENT_DIR", "HOME", "CLANKIE_PI_LOG"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.push(format!("{key}={}", v.to_string_lossy()));
        }
    }
    cmd.push(l.node.display().to_string());
    cmd.push(l.package.cli.display().to_string());
    cmd.push("--extension".into());
    cmd.push(l.worker.join("worker.mjs").display().to_string());
    if let Some(m) = l.model {
        cmd.push("--model".into());
        cmd.push(m.into());
    }
    cmd.extend(l.pi_args.iter().cloned());
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_the_oldest_release() {
        assert_eq!(parse_version("0.87.1"), Some((0, 87, 1)));
        assert_eq!(parse_version("1.6.0-beta.2"), Some((1, 6, 0)));
        assert_eq!(parse_version("1.6"), None);
        assert_eq!(parse_version("1.6.0.1"), None);
        let pkg = |v: &str| PiPackage {
            dir: PathBuf::new(),
            version: v.into(),
            cli: PathBuf::new(),
        };
        assert!(pkg("0.87.1").accepted().is_ok());
        assert!(pkg("1.0.3").accepted().is_ok());
        assert!(
            pkg("0.86.1")
                .accepted()
                .expect_err("old")
                .contains("not probed")
        );
        assert!(pkg("").accepted().is_err());
    }
}
