//! Codex as a harness: which release is installed, the hire's own profile
//! (a `CODEX_HOME` whose `config.toml` registers the fleet bridge), and the
//! pane command. The owner's own Codex home is read to seed a new profile
//! and never written.
//!
//! What the hire's `config.toml` gets (observed on 0.169.0):
//! - `[mcp_servers.clankie]`: `clankie mcp --fleet`, `required = true` (else
//!   the first turn may start before the bridge is ready), and `env_vars`
//!   naming what the bridge needs from the pane: Codex passes an MCP server
//!   only the variables listed there, so without them a tmux seat's bridge
//!   has no `TMUX_PANE` and no seat channel;
//!   (`CODEX_HOME` among them: the bridge hands deliveries to Codex's
//!   app-server, the daemon of the hire's own home, whose TUI shows them);
//! - each workspace trusted (else a trust prompt waits);
//! - no update check, unless the profile already says otherwise.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use toml_edit::{Array, DocumentMut, Item, Table, value};

use super::harness::{Installed, run_bounded};

/// The oldest release tested as a fleet worker.
pub const OLDEST: (u64, u64, u64) = (0, 169, 0);
/// The bridge's server name: Codex offers its tools in the namespace
/// `mcp__clankie`.
pub const SERVER: &str = "clankie";
/// What the bridge reads from the pane's environment.
pub const ENV_VARS: [&str; 9] = [
    "TMUX",
    "TMUX_PANE",
    "HERDR_ENV",
    "HERDR_PANE_ID",
    "HERDR_SOCKET_PATH",
    "CLANKIE_GATEWAY_DISCOVERY",
    "CLANKIE_WORKER_PANE",
    "CLANKIE_STATE",
    "CODEX_HOME",
];

/// The owner's own Codex home: `CODEX_HOME`, else `~/.codex`.
fn owner_home() -> Option<PathBuf> {
    std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")))
}

/// An installed Codex CLI.
#[derive(Debug, Clone)]
pub struct Codex {
    installed: Installed,
}

impl Codex {
    /// `--codex PATH`, else `codex` on PATH; its release from
    /// `codex --version` (`codex-cli 0.169.0`).
    pub async fn find(chosen: Option<&Path>) -> anyhow::Result<Codex> {
        Ok(Codex {
            installed: Installed::find("codex", chosen, 1).await?,
        })
    }

    /// Refuses a release older than the tested one.
    pub fn accepted(&self) -> anyhow::Result<()> {
        self.installed.accepted("codex", OLDEST)
    }

    /// Makes `profile` a hire's Codex home: seeded from the owner's when it
    /// has no `config.toml` yet, with the bridge registered and the
    /// workspaces trusted.
    pub fn prepare(&self, profile: &Path, workspaces: &[String]) -> anyhow::Result<()> {
        clankie_runtime::state::private_dir(profile)?;
        let owner = owner_home().and_then(|h| std::fs::canonicalize(h).ok());
        if owner.is_some() && owner == std::fs::canonicalize(profile).ok() {
            bail!(
                "{} is the owner's own Codex home; a hire gets a profile of its own",
                profile.display()
            );
        }
        let config = profile.join("config.toml");
        if !config.exists()
            && let Some(home) = &owner
        {
            for file in ["config.toml", "auth.json"] {
                if home.join(file).is_file() {
                    std::fs::copy(home.join(file), profile.join(file))
                        .with_context(|| format!("seeding the profile's {file}"))?;
                }
            }
        }
        let text = match std::fs::read_to_string(&config) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", config.display())),
        };
        let mut doc: DocumentMut = text
            .parse()
            .with_context(|| format!("{} is not TOML; it was left alone", config.display()))?;
        register(&mut doc, workspaces)?;
        clankie_runtime::state::atomic_write(&config, doc.to_string().as_bytes())
            .with_context(|| format!("writing {}", config.display()))
    }

    /// The pane command: the hire's Codex home and Codex's own arguments.
    pub fn pane_command(
        &self,
        profile: &Path,
        model: Option<&str>,
        args: &[String],
    ) -> Vec<String> {
        let mut cmd = vec![
            "env".to_string(),
            format!("CODEX_HOME={}", profile.display()),
            self.installed.bin.display().to_string(),
        ];
        if let Some(m) = model {
            cmd.push("--model".into());
            cmd.push(m.into());
        }
        cmd.extend(args.iter().cloned());
        cmd
    }
}

/// The Codex home and binary of a hire whose pane command this launcher
/// made (`env CODEX_HOME=… codex …`).
pub fn launched(command: &[String]) -> Option<(PathBuf, PathBuf)> {
    if command.first().map(String::as_str) != Some("env") {
        return None;
    }
    let home = command
        .iter()
        .find_map(|w| w.strip_prefix("CODEX_HOME="))
        .map(PathBuf::from)?;
    let bin = command
        .iter()
        .skip(1)
        .find(|w| !w.contains('='))
        .map(PathBuf::from)?;
    Some((home, bin))
}

/// Stops the app-server daemon a hire's Codex left running for its home:
/// Codex's own `app-server daemon stop`, then whatever still runs from the
/// copy of Codex the daemon keeps in that home (`packages/`).
pub async fn stop_daemon(home: &Path, bin: &Path) {
    let mut stop = tokio::process::Command::new(bin);
    stop.args(["app-server", "daemon", "stop"])
        .env("CODEX_HOME", home)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _ = run_bounded(&mut stop, Duration::from_secs(20)).await;
    let packages = home.join("packages");
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let runs_from_home = std::fs::read_link(entry.path().join("exe"))
            .is_ok_and(|exe| exe.starts_with(&packages));
        if runs_from_home {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
}

fn table<'a>(doc: &'a mut Table, key: &str) -> anyhow::Result<&'a mut Table> {
    doc.entry(key)
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .with_context(|| format!("`{key}` in the profile's config.toml is not a table"))
}

/// The bridge's registration and the hire's settings, into `doc`.
fn register(doc: &mut DocumentMut, workspaces: &[String]) -> anyhow::Result<()> {
    let clankie = std::env::current_exe().context("where is this binary")?;
    let root = doc.as_table_mut();
    if !root.contains_key("check_for_update_on_startup") {
        root["check_for_update_on_startup"] = value(false);
    }
    let projects = table(root, "projects")?;
    for w in workspaces {
        let mut t = Table::new();
        t["trust_level"] = value("trusted");
        projects.insert(w, Item::Table(t));
    }
    let servers = table(root, "mcp_servers")?;
    let mut bridge = Table::new();
    bridge["command"] = value(clankie.display().to_string());
    bridge["args"] = value(Array::from_iter(["mcp", "--fleet"]));
    bridge["env_vars"] = value(Array::from_iter(ENV_VARS));
    bridge["required"] = value(true);
    servers.insert(SERVER, Item::Table(bridge));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_codex_hires_home_is_read_back_from_its_command() {
        let cmd: Vec<String> = ["env", "CODEX_HOME=/p/codex-1", "/bin/codex", "--model", "m"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            launched(&cmd),
            Some((PathBuf::from("/p/codex-1"), PathBuf::from("/bin/codex")))
        );
        assert_eq!(launched(&["codex".to_string()]), None);
    }

    #[test]
    fn the_bridge_is_registered_beside_what_the_owner_configured() {
        let mut doc: DocumentMut = r#"
model = "gpt-x"
check_for_update_on_startup = true

[mcp_servers.docs]
command = "docs-server"

[mcp_servers.clankie]
command = "/old/clankie"
"#
        .parse()
        .expect("toml");
        register(&mut doc, &["/src/alpha".into()]).expect("register");
        let text = doc.to_string();
        let back: toml_edit::DocumentMut = text.parse().expect("still toml");
        assert_eq!(back["model"].as_str(), Some("gpt-x"));
        assert_eq!(
            back["check_for_update_on_startup"].as_bool(),
            Some(true),
            "the owner's choice"
        );
        assert_eq!(
            back["mcp_servers"]["docs"]["command"].as_str(),
            Some("docs-server")
        );
        let bridge = &back["mcp_servers"]["clankie"];
        assert_ne!(bridge["command"].as_str(), Some("/old/clankie"));
        assert_eq!(bridge["required"].as_bool(), Some(true));
        let vars: Vec<&str> = bridge["env_vars"]
            .as_array()
            .expect("env_vars")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(vars.contains(&"TMUX_PANE") && vars.contains(&"HERDR_PANE_ID"));
        assert_eq!(
            back["projects"]["/src/alpha"]["trust_level"].as_str(),
            Some("trusted")
        );
    }
}
