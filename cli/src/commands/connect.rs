//! `clankie connect` and `clankie disconnect`: the owner adds or removes an
//! MCP account (a stdio command or an HTTPS URL) in the mcp-host.

use crate::support::exit::Exit;
use clankie_runtime::clients::Call;
use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::Context;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::paths::StatePaths;
use clap::Args;

use crate::support::clients::{self, refused};

use super::accounts::print_account;

#[derive(Args)]
pub struct ConnectArgs {
    /// Account name: lowercase letters, digits and dashes.
    pub name: String,
    /// Streamable HTTP endpoint of the server.
    #[arg(long)]
    pub url: Option<String>,
    /// HTTP header `K:V` sent to the server (repeatable).
    #[arg(long = "header")]
    pub headers: Vec<String>,
    /// Environment `K=V` for a stdio server (repeatable).
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// Working directory for a stdio server.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Seconds to wait for verification.
    #[arg(long, default_value_t = 20)]
    pub wait: u32,
    /// The stdio server's command and arguments, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

pub async fn connect(paths: StatePaths, args: ConnectArgs) -> anyhow::Result<ExitCode> {
    let transport = match (&args.url, args.command.is_empty()) {
        (Some(url), true) => {
            let mut headers = HashMap::new();
            for h in &args.headers {
                let (k, v) = h
                    .split_once(':')
                    .with_context(|| format!("header {h:?} is not K:V"))?;
                headers.insert(k.trim().to_string(), v.trim().to_string());
            }
            mcphost_pb::connect_request::Transport::Http(mcphost_pb::HttpTransport {
                url: url.clone(),
                headers,
            })
        }
        (None, false) => {
            let mut env = HashMap::new();
            for kv in &args.env {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("env {kv:?} is not K=V"))?;
                env.insert(k.to_string(), v.to_string());
            }
            // The service resolves nothing on its own PATH (a service
            // manager's is minimal): the program is found here, and the
            // PATH it was found on goes with it for the interpreters a
            // script names, unless the owner gave one.
            let command = resolve_program(&args.command[0], args.cwd.as_deref())?;
            if !env.contains_key("PATH")
                && let Some(path) = std::env::var_os("PATH").and_then(|p| p.into_string().ok())
            {
                env.insert("PATH".into(), path);
            }
            mcphost_pb::connect_request::Transport::Stdio(mcphost_pb::StdioTransport {
                command,
                args: args.command[1..].to_vec(),
                env,
                cwd: args.cwd.clone().unwrap_or_default(),
            })
        }
        (Some(_), false) => {
            return Err(crate::support::exit::usage(
                "choose either --url or a command after --, not both",
            ));
        }
        (None, true) => {
            return Err(crate::support::exit::usage(
                "give a command after -- (stdio) or --url URL (streamable HTTP)",
            ));
        }
    };
    let mut client = clients::mcp_host(&paths)?;
    let req = Call::new(mcphost_pb::ConnectRequest {
        name: args.name,
        transport: Some(transport),
        wait_verified_ms: args.wait.saturating_mul(1000),
    })
    .timeout(std::time::Duration::from_secs(u64::from(args.wait) + 10))
    .request();
    let account = client
        .connect_account(req)
        .await
        .map_err(refused)?
        .into_inner()
        .account
        .unwrap_or_default();
    print_account(&account);
    Ok(
        if account.state == mcphost_pb::AccountState::Verified as i32 {
            ExitCode::SUCCESS
        } else {
            eprintln!(
                "the account is saved but not verified yet; `clankie accounts` shows its state"
            );
            Exit::Unsettled.code()
        },
    )
}

/// A stdio server's program as an absolute path: as given when it names a
/// folder (relative to `cwd` or here), else the first match on this
/// shell's `PATH`. Refused, naming what was searched, when there is none.
fn resolve_program(program: &str, cwd: Option<&str>) -> anyhow::Result<String> {
    let here = match cwd {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::current_dir().context("the current folder cannot be read")?,
    };
    let search = std::env::var_os("PATH").unwrap_or_default();
    let found = if program.contains('/') {
        let path = here.join(program);
        which::which_in(&path, None::<&str>, &here).map_err(|_| {
            anyhow::anyhow!(
                "{} is not an executable file; give the server's program as an absolute path",
                path.display()
            )
        })?
    } else {
        which::which_in(program, Some(&search), &here).map_err(|_| {
            anyhow::anyhow!(
                "{program} was not found on PATH ({}); install it, or give its absolute path after --",
                search.to_string_lossy()
            )
        })?
    };
    found
        .into_os_string()
        .into_string()
        .map_err(|p| anyhow::anyhow!("the program's path {} is not UTF-8", p.to_string_lossy()))
}

pub async fn disconnect(paths: StatePaths, name: String) -> anyhow::Result<ExitCode> {
    let removed = clients::mcp_host(&paths)?
        .disconnect_account(mcphost_pb::DisconnectRequest { name: name.clone() })
        .await
        .map_err(refused)?
        .into_inner()
        .removed;
    if removed {
        crate::say!("disconnected {name}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("no account named {name}");
        Ok(Exit::NotFound.code())
    }
}
