//! `clankie fleet machine`: the remote machines of a fleet, each running
//! its own stack that relays its panes' requests here.

use std::process::ExitCode;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::admission::v1::admission_client::AdmissionClient;
use clankie_runtime::grpc::Client;
use clap::Subcommand;

use crate::support::clients::refused;

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
}

fn print_machines(list: &admission_pb::ListMachinesResponse, json: bool) {
    if json {
        let machines: Vec<_> = list
            .machines
            .iter()
            .map(|m| {
                serde_json::json!({
                    "name": m.name, "fleet": m.fleet, "addedAtMs": m.added_at_ms,
                    "enrolled": m.enrolled,
                    "enrolledAtMs": (m.enrolled_at_ms != 0).then_some(m.enrolled_at_ms),
                    "enrolmentExpiresAtMs": (!m.enrolled).then_some(m.enrolment_expires_at_ms),
                })
            })
            .collect();
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
        let state = if m.enrolled {
            "enrolled".to_string()
        } else if m.enrolment_expires_at_ms <= now {
            "enrolment secret expired".to_string()
        } else {
            format!(
                "waiting to enrol, secret expires in {}",
                super::fleet::left(m.enrolment_expires_at_ms, now)
            )
        };
        println!("{} fleet={} {state}", m.name, m.fleet);
    }
}

pub async fn machine(
    mut client: AdmissionClient<Client>,
    command: MachineCommand,
) -> anyhow::Result<ExitCode> {
    match command {
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
