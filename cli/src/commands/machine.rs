//! `clankie fleet machine`: the remote machines of a fleet, each running
//! its own stack that relays its panes' requests here.

use std::process::ExitCode;

use clankie_proto::admission::v1 as admission_pb;
use clap::Subcommand;

use clankie_proto::relay::v1 as relay_pb;
use clankie_proto::relay::v1::relay_client::RelayClient;
use clankie_runtime::paths::StatePaths;
use clankie_runtime::relay_tls::{self, Identity, normalize_pin};

use crate::support::clients::{refusal, refused};
use crate::support::discovery;
use crate::support::exit::usage;

#[derive(Subcommand)]
pub enum MachineCommand {
    /// Register a remote machine; prints its one-time enrolment secret once.
    Add {
        /// The machine's name: lowercase letters, digits and dashes.
        name: String,
        /// The fleet its panes join.
        #[arg(long, default_value = "local")]
        fleet: String,
        /// How long the enrolment secret works (`30m`, `12h`); one hour
        /// when left out.
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<std::time::Duration>,
    },
    /// The registered machines: name, fleet, enrolled or not (never a secret).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a machine; its enrolment secret stops working at once.
    Remove { name: String },
    /// On the remote machine: enrol this stack with the main stack, reading
    /// the enrolment secret from standard input (never an argument, which
    /// other processes can read). The main stack's certificate must be the
    /// pinned one; the secret is spent binding this stack's own key.
    Enrol {
        /// The name the owner registered this machine under.
        name: String,
        /// The main stack's relay listener, `HOST:PORT`.
        #[arg(long)]
        main: String,
        /// The SHA-256 of the main stack's certificate, as `fleet machine
        /// add` printed it.
        #[arg(long)]
        pin: String,
    },
}

/// A remote machine's link to its main stack, as kept in `relay/link.json`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayLink {
    pub version: u32,
    pub main: String,
    pub pin: String,
    pub machine: String,
    pub fleet: String,
    pub enrolled_at_ms: i64,
}

/// One machine as `--json` shows it (never a secret).
pub(super) fn machine_json(m: &admission_pb::Machine) -> serde_json::Value {
    serde_json::json!({
        "name": m.name, "fleet": m.fleet, "addedAtMs": m.added_at_ms,
        "enrolled": m.enrolled,
        "enrolledAtMs": (m.enrolled_at_ms != 0).then_some(m.enrolled_at_ms),
        "enrolmentExpiresAtMs": (!m.enrolled).then_some(m.enrolment_expires_at_ms),
        "keySha256": (!m.key_sha256.is_empty()).then_some(&m.key_sha256),
        "link": {
            "up": m.link_up,
            "sinceMs": (m.link_since_ms != 0).then_some(m.link_since_ms),
            "rttMs": m.link_up.then_some(m.link_rtt_ms),
            "inFlight": m.link_up.then_some(m.link_in_flight),
        },
    })
}

/// One machine as a line: its name, fleet, and where its link stands.
pub(super) fn machine_line(m: &admission_pb::Machine, now: i64) -> String {
    let state = if m.link_up {
        format!(
            "link up for {} (round trip {} ms, {} relayed call(s) in flight)",
            super::fleet::left(now, m.link_since_ms),
            m.link_rtt_ms,
            m.link_in_flight
        )
    } else if m.enrolled && m.link_since_ms != 0 {
        format!(
            "enrolled, link down for {}",
            super::fleet::left(now, m.link_since_ms)
        )
    } else if m.enrolled {
        "enrolled, not linked yet".to_string()
    } else if m.enrolment_expires_at_ms <= now {
        "enrolment secret expired".to_string()
    } else {
        format!(
            "waiting to enrol, secret expires in {}",
            super::fleet::left(m.enrolment_expires_at_ms, now)
        )
    };
    format!("{} fleet={} {state}", m.name, m.fleet)
}

fn print_machines(list: &admission_pb::ListMachinesResponse, json: bool) {
    if json {
        let machines: Vec<_> = list.machines.iter().map(machine_json).collect();
        println!(
            "{}",
            serde_json::json!({ "machines": machines, "unreadable": list.unreadable })
        );
        return;
    }
    if list.unreadable {
        eprintln!(
            "the machines file (admission/machines.json) cannot be read: no machine is listed or admitted until it is repaired"
        );
        return;
    }
    if list.machines.is_empty() {
        println!("no machines (add one with `clankie fleet machine add NAME`)");
    }
    let now = clankie_runtime::now_ms();
    for m in &list.machines {
        println!("{}", machine_line(m, now));
    }
}

/// Refuses unless this stack is enrolled as `machine` with the main stack
/// at `to` (`up --relay-to TO --machine NAME`).
pub fn check_enrolled(paths: &StatePaths, to: &str, machine: &str) -> anyhow::Result<()> {
    let enrol_first = || {
        anyhow::anyhow!(
            "this stack is not enrolled as {machine} with {to}: run `clankie fleet machine enrol {machine} --main {to} --pin SHA256` first, with the secret `fleet machine add` printed on stdin"
        )
    };
    let link: RelayLink = match std::fs::read(paths.relay_link()) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            anyhow::anyhow!(
                "{} cannot be read ({e}); enrol again",
                paths.relay_link().display()
            )
        })?,
        Err(_) => return Err(enrol_first()),
    };
    if link.main != to || link.machine != machine {
        anyhow::bail!(
            "this stack is enrolled as {} with {}, not as {machine} with {to}",
            link.machine,
            link.main
        );
    }
    Ok(())
}

/// Reads the enrolment secret: one line of standard input.
fn read_secret() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let secret = line.trim().to_string();
    if !secret.starts_with("clkm_") {
        return Err(usage(
            "pass the enrolment secret (clkm_…) on standard input, as `fleet machine add` printed it",
        ));
    }
    Ok(secret)
}

/// Enrols this stack as machine `name` of the main stack at `main`.
async fn enrol(paths: &StatePaths, name: String, main: String, pin: &str) -> anyhow::Result<()> {
    let pin = normalize_pin(pin)
        .ok_or_else(|| usage("--pin is the SHA-256 (64 hex digits) `fleet machine add` printed"))?;
    let secret = read_secret()?;
    let identity = Identity::load_or_create(&paths.relay_identity(), &format!("clankie-{name}"))?;
    // The pin is checked on a handshake of its own, so a wrong server is
    // named as such and never sees the secret.
    relay_tls::check_pin(&main, &identity, &pin)
        .await
        .map_err(refusal)?;
    let channel = relay_tls::channel(&main, &identity, &pin)?;
    let mut relay = RelayClient::new(channel);
    let req = clankie_runtime::clients::Call::new(relay_pb::EnrolRequest {
        machine: name,
        secret,
    })
    .timeout(std::time::Duration::from_secs(30))
    .request();
    let enrolled = relay.enrol(req).await.map_err(refused)?.into_inner();
    let link = RelayLink {
        version: 1,
        main: main.clone(),
        pin,
        machine: enrolled.machine.clone(),
        fleet: enrolled.fleet.clone(),
        enrolled_at_ms: enrolled.enrolled_at_ms,
    };
    clankie_runtime::state::save_json(&paths.relay_link(), &link)?;
    println!(
        "enrolled as machine {} of fleet {} at {main}",
        enrolled.machine, enrolled.fleet
    );
    Ok(())
}

/// What a machine needs to enrol, from the running gateway's discovery.
fn enrolment_hint(paths: &StatePaths, name: &str) {
    match discovery::read(paths).ok().and_then(|d| d.relay) {
        Some(relay) => eprintln!(
            "on {name}, with its own stack's state, run:\n  clankie fleet machine enrol {name} --main HOST:{port} --pin {pin}\nand give it the secret on standard input (HOST: this machine's address as {name} reaches it; the listener is {addr})",
            port = relay.addr.rsplit(':').next().unwrap_or(""),
            pin = relay.cert_sha256,
            addr = relay.addr,
        ),
        None => eprintln!(
            "this stack has no relay listener yet: start it with CLANKIE_RELAY_ADDR=HOST:PORT so {name} can enrol"
        ),
    }
}

pub async fn machine(paths: &StatePaths, command: MachineCommand) -> anyhow::Result<ExitCode> {
    // Enrolment runs on the remote machine and speaks only to the main
    // stack; everything else asks this stack's admission as the owner.
    if let MachineCommand::Enrol { name, main, pin } = command {
        enrol(paths, name, main, &pin).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut client = crate::support::clients::admission(paths)?;
    match command {
        MachineCommand::Enrol { .. } => unreachable!("answered above"),
        MachineCommand::Add {
            name,
            fleet,
            expires_in,
        } => {
            let expires_in_ms = super::fleet::expiry_ms(expires_in);
            let resp = client
                .add_machine(admission_pb::AddMachineRequest {
                    name,
                    fleet,
                    expires_in_ms,
                })
                .await
                .map_err(refused)?
                .into_inner();
            let m = resp.machine.unwrap_or_default();
            eprintln!(
                "registered machine {} in fleet {}; its enrolment secret is shown once, works once, and only its hash is kept:",
                m.name, m.fleet
            );
            println!("{}", resp.enrolment_secret);
            enrolment_hint(paths, &m.name);
        }
        MachineCommand::List { json } => {
            let list = client
                .list_machines(admission_pb::ListMachinesRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            print_machines(&list, json);
            if list.unreadable {
                return Ok(ExitCode::FAILURE);
            }
        }
        MachineCommand::Remove { name } => {
            client
                .remove_machine(admission_pb::RemoveMachineRequest { name: name.clone() })
                .await
                .map_err(refused)?;
            println!("removed machine {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
