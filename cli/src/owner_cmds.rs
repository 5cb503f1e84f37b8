//! Owner commands: they read the owner credential and speak gRPC to the
//! services over their Unix sockets.

use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clankie_proto::admission::v1 as apb;
use clankie_proto::common::v1::FleetTools;
use clankie_proto::mcphost::v1 as mpb;
use clankie_runtime::grpc::{Client, Meta};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::{ClankieError, owner};
use clap::{Args, Subcommand, ValueEnum};

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

#[derive(Subcommand)]
pub enum FleetCommand {
    /// Links and switches.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Change fleet settings.
    Set {
        /// fleet.tools: connected or off.
        #[arg(long)]
        tools: Option<ToolsArg>,
        /// fleet.peerMessages: on or off.
        #[arg(long)]
        peer_messages: Option<OnOff>,
        /// fleet.workerSandbox: new local hires start under bubblewrap.
        #[arg(long)]
        worker_sandbox: Option<OnOff>,
    },
    /// Remote fleet bearer links.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Pin one multiplexer session to a fleet: processes in its panes get
    /// the fleet tools through the local socket, with no token.
    Link {
        /// A tmux server socket (`tmux -S SOCKET`).
        #[arg(long, conflicts_with = "herdr")]
        tmux: Option<std::path::PathBuf>,
        /// The tmux session to pin (default: every session of that server).
        #[arg(long, requires = "tmux")]
        session: Option<String>,
        /// Link the Herdr server (socket from --socket or Herdr's own search order).
        #[arg(long)]
        herdr: bool,
        /// Herdr's API socket.
        #[arg(long, requires = "herdr")]
        socket: Option<std::path::PathBuf>,
        /// The fleet the panes join.
        #[arg(long, default_value = "local")]
        fleet: String,
    },
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create a bearer link for FLEET; prints the token once.
    Create {
        fleet: String,
        #[arg(long, default_value = "")]
        label: String,
    },
    /// Remove a link by id; its requests stop at once.
    Revoke { link_id: String },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ToolsArg {
    Connected,
    Off,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// A client meta carrying the owner credential.
pub fn owner_meta(paths: &StatePaths) -> anyhow::Result<Meta> {
    let path = paths.owner_credential();
    match owner::read_owner_token(&path) {
        Ok(t) if !t.is_empty() => Ok(Meta::owner(&t)),
        _ => {
            if std::env::var("CLANKIE_WORKER_PANE").as_deref() == Ok("1") {
                bail!("hired workers don't hold the owner's credential");
            }
            bail!(
                "no owner credential in {}; start the stack with `clankie up` first",
                paths.root().display()
            )
        }
    }
}

fn mcp_client(paths: &StatePaths) -> anyhow::Result<mpb::mcp_host_client::McpHostClient<Client>> {
    Ok(clankie_runtime::clients::mcp_host(
        paths,
        owner_meta(paths)?,
    ))
}

pub fn admission_client(
    paths: &StatePaths,
) -> anyhow::Result<apb::admission_client::AdmissionClient<Client>> {
    Ok(clankie_runtime::clients::admission(
        paths,
        owner_meta(paths)?,
    ))
}

/// Turns a gRPC status into a one-line refusal.
pub fn refused(s: tonic::Status) -> anyhow::Error {
    let e = ClankieError::from_status(&s);
    if s.code() == tonic::Code::Unavailable && s.message().contains("transport") {
        return anyhow::anyhow!("the service is not running (start it with `clankie up`)");
    }
    anyhow::anyhow!("refused ({}): {}", e.code, e.message)
}

fn state_name(s: i32) -> &'static str {
    match mpb::AccountState::try_from(s) {
        Ok(mpb::AccountState::Verified) => "verified",
        Ok(mpb::AccountState::Verifying) => "verifying",
        Ok(mpb::AccountState::Unavailable) => "unavailable",
        _ => "unknown",
    }
}

fn account_json(a: &mpb::Account) -> serde_json::Value {
    serde_json::json!({
        "name": a.name,
        "transport": a.transport,
        "target": a.target,
        "state": state_name(a.state),
        "identity": { "name": a.identity_name, "version": a.identity_version },
        "protocolVersion": a.protocol_version,
        "tools": a.tool_count,
        "lastError": a.last_error,
        "generation": a.generation,
        "restarts": a.restarts,
    })
}

fn print_account(a: &mpb::Account) {
    let identity = if a.identity_name.is_empty() {
        "-".to_string()
    } else {
        // Named by the upstream server: never raw on the terminal.
        crate::terminal::field(&format!("{} {}", a.identity_name, a.identity_version)).into_owned()
    };
    println!(
        "{:<20} {:<12} {:<5} tools={:<4} identity={} target={}{}",
        a.name,
        state_name(a.state),
        a.transport,
        a.tool_count,
        identity,
        a.target,
        if a.last_error.is_empty() {
            String::new()
        } else {
            format!(" error={}", crate::terminal::field(&a.last_error))
        }
    );
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
            mpb::connect_request::Transport::Http(mpb::HttpTransport {
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
            mpb::connect_request::Transport::Stdio(mpb::StdioTransport {
                command: args.command[0].clone(),
                args: args.command[1..].to_vec(),
                env,
                cwd: args.cwd.clone().unwrap_or_default(),
            })
        }
        (Some(_), false) => bail!("choose either --url or a command after --, not both"),
        (None, true) => bail!("give a command after -- (stdio) or --url URL (streamable HTTP)"),
    };
    let mut client = mcp_client(&paths)?;
    let mut req = tonic::Request::new(mpb::ConnectRequest {
        name: args.name,
        transport: Some(transport),
        wait_verified_ms: args.wait.saturating_mul(1000),
    });
    req.set_timeout(std::time::Duration::from_secs(u64::from(args.wait) + 10));
    let account = client
        .connect_account(req)
        .await
        .map_err(refused)?
        .into_inner()
        .account
        .unwrap_or_default();
    print_account(&account);
    Ok(if account.state == mpb::AccountState::Verified as i32 {
        ExitCode::SUCCESS
    } else {
        eprintln!("the account is saved but not verified yet; `clankie accounts` shows its state");
        ExitCode::from(3)
    })
}

pub async fn disconnect(paths: StatePaths, name: String) -> anyhow::Result<ExitCode> {
    let removed = mcp_client(&paths)?
        .disconnect_account(mpb::DisconnectRequest { name: name.clone() })
        .await
        .map_err(refused)?
        .into_inner()
        .removed;
    if removed {
        println!("disconnected {name}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("no account named {name}");
        Ok(ExitCode::from(4))
    }
}

pub async fn accounts(paths: StatePaths, json: bool) -> anyhow::Result<ExitCode> {
    let resp = mcp_client(&paths)?
        .list_accounts(mpb::ListAccountsRequest {})
        .await
        .map_err(refused)?
        .into_inner();
    if json {
        let list: Vec<_> = resp.accounts.iter().map(account_json).collect();
        crate::terminal::print_json(
            &serde_json::json!({ "revision": resp.revision.to_string(), "accounts": list }),
        );
    } else if resp.accounts.is_empty() {
        println!("no connected accounts (add one with `clankie connect NAME -- CMD ARGS...`)");
    } else {
        for a in &resp.accounts {
            print_account(a);
        }
        println!("catalog revision {}", resp.revision);
    }
    Ok(ExitCode::SUCCESS)
}

fn tools_name(t: i32) -> &'static str {
    match FleetTools::try_from(t) {
        Ok(FleetTools::Connected) => "connected",
        Ok(FleetTools::Off) => "off",
        _ => "unknown",
    }
}

fn print_status(s: &apb::FleetStatusResponse, json: bool) {
    let settings = s.settings.unwrap_or_default();
    if json {
        let links: Vec<_> = s
            .links
            .iter()
            .map(|l| {
                serde_json::json!({
                    "linkId": l.link_id, "fleet": l.fleet, "kind": l.kind,
                    "label": l.label, "createdAtMs": l.created_at_ms,
                    "socket": l.socket, "session": l.session,
                })
            })
            .collect();
        let stats = s.local_proofs.clone().unwrap_or_default();
        println!(
            "{}",
            serde_json::json!({
                "tools": tools_name(settings.tools),
                "peerMessages": if settings.peer_messages { "on" } else { "off" },
                "workerSandbox": if settings.worker_sandbox { "on" } else { "off" },
                "settingsRevision": settings.revision,
                "links": links,
                "localProofs": {
                    "proofs": stats.proofs,
                    "reuses": stats.reuses,
                    "refusals": stats.refusals,
                },
            })
        );
        return;
    }
    println!("fleet.tools: {}", tools_name(settings.tools));
    println!(
        "fleet.peerMessages: {}",
        if settings.peer_messages { "on" } else { "off" }
    );
    println!(
        "fleet.workerSandbox: {}",
        if settings.worker_sandbox {
            "on (new local hires start under bubblewrap)"
        } else {
            "off"
        }
    );
    if let Some(stats) = &s.local_proofs {
        let mut refusals: Vec<String> = stats
            .refusals
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        refusals.sort();
        println!(
            "local proofs: {} proven, {} reused, refusals: {}",
            stats.proofs,
            stats.reuses,
            if refusals.is_empty() {
                "none".into()
            } else {
                refusals.join(" ")
            }
        );
    }
    if s.links.is_empty() {
        println!("links: none (create one with `clankie fleet token create FLEET`)");
    }
    for l in &s.links {
        let scope = if l.kind == "bearer" {
            "(pane:unverified)".to_string()
        } else if l.session.is_empty() {
            format!("socket={}", l.socket)
        } else {
            format!("socket={} session={}", l.socket, l.session)
        };
        println!(
            "link {} fleet={} kind={} {scope}{}",
            l.link_id,
            l.fleet,
            l.kind,
            if l.label.is_empty() {
                String::new()
            } else {
                format!(" label={}", l.label)
            }
        );
    }
}

pub async fn fleet(paths: StatePaths, command: FleetCommand) -> anyhow::Result<ExitCode> {
    let mut client = admission_client(&paths)?;
    match command {
        FleetCommand::Status { json } => {
            let s = client
                .fleet_status(apb::FleetStatusRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            print_status(&s, json);
        }
        FleetCommand::Set {
            tools,
            peer_messages,
            worker_sandbox,
        } => {
            if tools.is_none() && peer_messages.is_none() && worker_sandbox.is_none() {
                bail!(
                    "nothing to set: use --tools connected|off, --peer-messages on|off or --worker-sandbox on|off"
                );
            }
            let tools = match tools {
                Some(ToolsArg::Connected) => FleetTools::Connected,
                Some(ToolsArg::Off) => FleetTools::Off,
                None => FleetTools::Unspecified,
            };
            let s = client
                .set_fleet_settings(apb::SetFleetSettingsRequest {
                    tools: tools as i32,
                    peer_messages: peer_messages.map(|p| p == OnOff::On),
                    worker_sandbox: worker_sandbox.map(|p| p == OnOff::On),
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_status(&s, false);
        }
        FleetCommand::Link {
            tmux,
            session,
            herdr,
            socket,
            fleet,
        } => {
            let (kind, socket) = match (tmux, herdr) {
                (Some(t), false) => ("tmux", t),
                (None, true) => (
                    "herdr",
                    match socket {
                        Some(s) => s,
                        None => clankie_runtime::paths::herdr_socket()
                            .context("no Herdr socket found; pass --socket")?,
                    },
                ),
                _ => bail!("choose --tmux SOCKET or --herdr"),
            };
            let socket = std::path::absolute(&socket)?;
            let link = client
                .create_local_link(apb::CreateLocalLinkRequest {
                    fleet,
                    kind: kind.into(),
                    socket: socket.display().to_string(),
                    session: session.unwrap_or_default(),
                })
                .await
                .map_err(refused)?
                .into_inner();
            println!(
                "linked {} {}{} to fleet {} as {}",
                link.kind,
                link.socket,
                if link.session.is_empty() {
                    String::new()
                } else {
                    format!(" (session {})", link.session)
                },
                link.fleet,
                link.link_id
            );
        }
        FleetCommand::Token { command } => match command {
            TokenCommand::Create { fleet, label } => {
                let resp = client
                    .create_fleet_token(apb::CreateFleetTokenRequest { fleet, label })
                    .await
                    .map_err(refused)?
                    .into_inner();
                let link = resp.link.unwrap_or_default();
                eprintln!(
                    "created link {} for fleet {}; the token is shown once and only its hash is kept:",
                    link.link_id, link.fleet
                );
                println!("{}", resp.token);
            }
            TokenCommand::Revoke { link_id } => {
                let revoked = client
                    .revoke_fleet_link(apb::RevokeFleetLinkRequest {
                        link_id: link_id.clone(),
                    })
                    .await
                    .map_err(refused)?
                    .into_inner()
                    .revoked;
                if !revoked {
                    eprintln!("no link {link_id}");
                    return Ok(ExitCode::from(4));
                }
                println!("revoked {link_id}");
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
