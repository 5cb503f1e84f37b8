//! `clankie fleet`: fleet links (link, unlink, tokens) and the switches
//! (tools, sandbox), through admission.

use crate::support::exit::Exit;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::common::v1::FleetTools;
use clankie_runtime::paths::StatePaths;
use clap::{Subcommand, ValueEnum};

use crate::support::clients::{self, refused};

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
    /// Remote machines, each relaying its own panes' requests.
    Machine {
        #[command(subcommand)]
        command: super::machine::MachineCommand,
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
        /// How long the token admits (`30m`, `12h`, `7d`); until revoked
        /// when left out.
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<std::time::Duration>,
    },
    /// The bearer links: id, fleet, label, created and expiry (never the token).
    List {
        #[arg(long)]
        json: bool,
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

fn tools_name(t: i32) -> &'static str {
    clankie_types::FleetTools::word_or_unknown(t)
}

fn print_status(s: &admission_pb::FleetStatusResponse, json: bool) {
    let settings = s.settings.unwrap_or_default();
    if json {
        let links: Vec<_> = s
            .links
            .iter()
            .map(|l| {
                serde_json::json!({
                    "linkId": l.link_id, "fleet": l.fleet, "kind": clankie_types::LinkKind::wire_word(l.kind),
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
                "problems": s.problems,
                "links": links,
                "machines": s.machines.iter().map(super::machine::machine_json).collect::<Vec<_>>(),
                "localProofs": {
                    "proofs": stats.proofs,
                    "reuses": stats.reuses,
                    "refusals": stats.refusals,
                    "paneReads": stats.pane_reads,
                    "paneMapHits": stats.pane_map_hits,
                },
            })
        );
        return;
    }
    for p in &s.problems {
        println!("problem: {p}");
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
    let now = clankie_runtime::now_ms();
    for m in &s.machines {
        println!("machine {}", super::machine::machine_line(m, now));
    }
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
    if s.links.is_empty() && s.problems.is_empty() {
        println!("links: none (create one with `clankie fleet token create FLEET`)");
    }
    for l in &s.links {
        let scope = if l.kind == clankie_types::LinkKind::Bearer.wire() {
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
            clankie_types::LinkKind::wire_word(l.kind),
            if l.label.is_empty() {
                String::new()
            } else {
                format!(" label={}", l.label)
            }
        );
    }
}

/// The bearer links, as `fleet token list` shows them.
fn print_tokens(s: &admission_pb::FleetStatusResponse, json: bool) {
    let bearer: Vec<&admission_pb::FleetLink> = s
        .links
        .iter()
        .filter(|l| l.kind == clankie_types::LinkKind::Bearer.wire())
        .collect();
    let expiry = |l: &admission_pb::FleetLink| (l.expires_at_ms != 0).then_some(l.expires_at_ms);
    if json {
        let tokens: Vec<_> = bearer
            .iter()
            .map(|l| {
                serde_json::json!({
                    "linkId": l.link_id, "fleet": l.fleet, "label": l.label,
                    "createdAtMs": l.created_at_ms, "expiresAtMs": expiry(l),
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "tokens": tokens }));
        return;
    }
    if bearer.is_empty() {
        println!("no fleet tokens (create one with `clankie fleet token create FLEET`)");
    }
    let now = clankie_runtime::now_ms();
    for l in bearer {
        let expires = match expiry(l) {
            None => "never expires".to_string(),
            Some(at) if at <= now => "expired".to_string(),
            Some(at) => format!("expires in {}", left(at, now)),
        };
        println!(
            "{} fleet={}{} {expires}",
            l.link_id,
            l.fleet,
            if l.label.is_empty() {
                String::new()
            } else {
                format!(" label={}", l.label)
            }
        );
    }
}

/// An `--expires-in` as the milliseconds the RPCs take (0: none given).
pub(super) fn expiry_ms(expires_in: Option<std::time::Duration>) -> i64 {
    expires_in.map_or(0, |d| {
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
    })
}

/// The time from `now` until `at` (both ms), to the second, as words.
pub(super) fn left(at: i64, now: i64) -> humantime::FormattedDuration {
    humantime::format_duration(std::time::Duration::from_secs(
        u64::try_from((at - now) / 1000).unwrap_or(0),
    ))
}

pub async fn fleet(paths: StatePaths, command: FleetCommand) -> anyhow::Result<ExitCode> {
    if let FleetCommand::Machine { command } = command {
        return super::machine::machine(&paths, command).await;
    }
    let mut client = clients::admission(&paths)?;
    match command {
        FleetCommand::Machine { .. } => unreachable!("answered above"),
        FleetCommand::Status { json } => {
            let s = client
                .fleet_status(admission_pb::FleetStatusRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            print_status(&s, json);
            if !s.problems.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        FleetCommand::Set {
            tools,
            peer_messages,
            worker_sandbox,
        } => {
            if tools.is_none() && peer_messages.is_none() && worker_sandbox.is_none() {
                return Err(crate::support::exit::usage(
                    "nothing to set: use --tools connected|off, --peer-messages on|off or --worker-sandbox on|off",
                ));
            }
            let tools = match tools {
                Some(ToolsArg::Connected) => FleetTools::Connected,
                Some(ToolsArg::Off) => FleetTools::Off,
                None => FleetTools::Unspecified,
            };
            let s = client
                .set_fleet_settings(admission_pb::SetFleetSettingsRequest {
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
                (Some(t), false) => (clankie_types::LinkKind::Tmux, t),
                (None, true) => (
                    clankie_types::LinkKind::Herdr,
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
                .create_local_link(admission_pb::CreateLocalLinkRequest {
                    fleet,
                    kind: kind.wire(),
                    socket: socket.display().to_string(),
                    session: session.unwrap_or_default(),
                })
                .await
                .map_err(refused)?
                .into_inner();
            println!(
                "linked {} {}{} to fleet {} as {}",
                clankie_types::LinkKind::wire_word(link.kind),
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
            TokenCommand::Create {
                fleet,
                label,
                expires_in,
            } => {
                let expires_in_ms = expiry_ms(expires_in);
                let resp = client
                    .create_fleet_token(admission_pb::CreateFleetTokenRequest {
                        fleet,
                        label,
                        expires_in_ms,
                    })
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
            TokenCommand::List { json } => {
                let s = client
                    .fleet_status(admission_pb::FleetStatusRequest {})
                    .await
                    .map_err(refused)?
                    .into_inner();
                print_tokens(&s, json);
            }
            TokenCommand::Revoke { link_id } => {
                let revoked = client
                    .revoke_fleet_link(admission_pb::RevokeFleetLinkRequest {
                        link_id: link_id.clone(),
                    })
                    .await
                    .map_err(refused)?
                    .into_inner()
                    .revoked;
                if !revoked {
                    eprintln!("no link {link_id}");
                    return Ok(Exit::NotFound.code());
                }
                println!("revoked {link_id}");
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
