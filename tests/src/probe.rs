//! `clankie-probe`: a hostile process for the security scenarios. It calls
//! every internal socket of a stack directly, naming another pane's pid
//! where an RPC takes one, and writes what each call answered as JSON.
//!
//!   clankie-probe STATE_DIR VICTIM_PID OUT          no credential at all
//!   clankie-probe STATE_DIR VICTIM_PID OUT owner    with the owner
//!                                                   credential (sandbox off)
//!
//! Without the credential every RPC is tried, writes included: the point
//! is that none of them may land. With it only the pid-naming RPCs are
//! tried: the owner is trusted, but not to name processes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::auto::v1 as auto_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::grpc::{self, Meta};
use serde_json::json;

/// The reason a call was refused, or `ok`.
fn outcome<T>(r: Result<tonic::Response<T>, tonic::Status>) -> String {
    use clankie_runtime::clients::Answer as _;
    match r.answer() {
        Ok(_) => "ok".into(),
        Err(e) => e.code.as_str().to_string(),
    }
}

fn req<T>(msg: T, ticket: &str) -> tonic::Request<T> {
    let mut r = clankie_runtime::clients::Call::new(msg)
        .timeout(Duration::from_secs(5))
        .request();
    if !ticket.is_empty() {
        grpc::set_ticket(&mut r, ticket);
    }
    r
}

struct Probe {
    run: PathBuf,
    meta: Meta,
    results: BTreeMap<String, String>,
}

impl Probe {
    fn client(&self, service: &str) -> grpc::Client {
        grpc::client(&self.run.join(format!("{service}.sock")), self.meta.clone())
    }

    fn note(&mut self, name: &str, result: String) {
        self.results.insert(name.into(), result);
    }

    /// The RPCs that name what only a proof may: a process (admission's
    /// kernel proofs) or a machine's key (which only the gateway reads,
    /// from a TLS handshake).
    async fn pid_naming(&mut self, victim: i32) -> String {
        let uid = nix::unistd::getuid().as_raw();
        let victim_req = admission_pb::ProveLocalRequest {
            pid: victim,
            uid,
            ..Default::default()
        };
        let mut admission =
            admission_pb::admission_client::AdmissionClient::new(self.client("admission"));
        let proved = admission.prove_local(req(victim_req.clone(), "")).await;
        let ticket = proved
            .as_ref()
            .map(|r| r.get_ref().ticket.clone())
            .unwrap_or_default();
        self.note("admission.ProveLocal", outcome(proved));
        let seat = admission.observe_seat(req(victim_req, "")).await;
        self.note("admission.ObserveSeat", outcome(seat));
        let key = "ab".repeat(32);
        let r = admission
            .enrol_machine(req(
                admission_pb::EnrolMachineRequest {
                    name: "pc".into(),
                    secret: "clkm_guess".into(),
                    key_sha256: key.clone(),
                },
                "",
            ))
            .await;
        self.note("admission.EnrolMachine", outcome(r));
        let r = admission
            .prove_machine(req(
                admission_pb::ProveMachineRequest { key_sha256: key },
                "",
            ))
            .await;
        self.note("admission.ProveMachine", outcome(r));
        ticket
    }

    async fn everything(&mut self, ticket: &str) {
        let t = if ticket.is_empty() {
            "tkt_forged"
        } else {
            ticket
        };
        let mut admission =
            admission_pb::admission_client::AdmissionClient::new(self.client("admission"));
        let r = admission
            .recheck(req(admission_pb::RecheckRequest { ticket: t.into() }, ""))
            .await;
        self.note("admission.Recheck", outcome(r));
        let r = admission
            .ticket_principal(req(admission_pb::RecheckRequest { ticket: t.into() }, ""))
            .await;
        self.note("admission.TicketPrincipal", outcome(r));
        let r = admission
            .observe_ticket_seat(req(admission_pb::RecheckRequest { ticket: t.into() }, ""))
            .await;
        self.note("admission.ObserveTicketSeat", outcome(r));
        let r = admission
            .fleet_status(req(admission_pb::FleetStatusRequest {}, ""))
            .await;
        self.note("admission.FleetStatus", outcome(r));
        let r = admission
            .set_fleet_settings(req(
                admission_pb::SetFleetSettingsRequest {
                    tools: clankie_proto::common::v1::FleetTools::Off as i32,
                    ..Default::default()
                },
                "",
            ))
            .await;
        self.note("admission.SetFleetSettings", outcome(r));
        let r = admission
            .create_fleet_token(req(
                admission_pb::CreateFleetTokenRequest {
                    fleet: "stolen".into(),
                    label: String::new(),
                    expires_in_ms: 0,
                },
                "",
            ))
            .await;
        self.note("admission.CreateFleetToken", outcome(r));
        let r = admission
            .add_machine(req(
                admission_pb::AddMachineRequest {
                    name: "stolen".into(),
                    fleet: "local".into(),
                    expires_in_ms: 0,
                },
                "",
            ))
            .await;
        self.note("admission.AddMachine", outcome(r));
        let r = admission
            .list_machines(req(admission_pb::ListMachinesRequest {}, ""))
            .await;
        self.note("admission.ListMachines", outcome(r));
        let r = admission
            .remove_machine(req(
                admission_pb::RemoveMachineRequest { name: "pc".into() },
                "",
            ))
            .await;
        self.note("admission.RemoveMachine", outcome(r));
        let r = admission
            .admit(req(
                admission_pb::AdmitRequest {
                    bearer: "clkf_guess".into(),
                },
                "",
            ))
            .await;
        self.note("admission.Admit", outcome(r));

        let mut mailbox = mailbox_pb::mailbox_client::MailboxClient::new(self.client("mailbox"));
        let r = mailbox
            .seat_poll(req(
                mailbox_pb::SeatPollRequest {
                    wait_ms: 0,
                    ..Default::default()
                },
                t,
            ))
            .await;
        let deliveries: Vec<String> = r
            .as_ref()
            .map(|r| {
                r.get_ref()
                    .deliveries
                    .iter()
                    .map(|d| d.delivery_id.clone())
                    .collect()
            })
            .unwrap_or_default();
        self.note("mailbox.SeatPoll", outcome(r));
        let r = mailbox
            .seat_claim(req(
                mailbox_pb::SeatClaimRequest {
                    delivery_ids: deliveries.clone(),
                },
                t,
            ))
            .await;
        let claim = r
            .as_ref()
            .map(|r| r.get_ref().claim_id.clone())
            .unwrap_or_default();
        self.note("mailbox.SeatClaim", outcome(r));
        let r = mailbox
            .seat_ack(req(
                mailbox_pb::SeatAckRequest {
                    delivery_id: deliveries.first().cloned().unwrap_or_default(),
                    claim_id: claim,
                },
                t,
            ))
            .await;
        self.note("mailbox.SeatAck", outcome(r));
        let r = mailbox
            .list_peers(req(mailbox_pb::ListPeersRequest {}, t))
            .await;
        let peer = r
            .as_ref()
            .ok()
            .and_then(|r| r.get_ref().seats.first().map(|s| s.seat_id.clone()))
            .unwrap_or_else(|| "seat-guess".into());
        self.note("mailbox.ListPeers", outcome(r));
        let r = mailbox
            .send_peer(req(
                mailbox_pb::SendPeerRequest {
                    seat: peer,
                    text: "from the probe".into(),
                    receipt_id: "rcpt-probe-peer".into(),
                },
                t,
            ))
            .await;
        self.note("mailbox.SendPeer", outcome(r));
        let r = mailbox
            .report(req(
                mailbox_pb::ReportRequest {
                    receipt_id: "rpt-probe-0001".into(),
                    text: "from the probe".into(),
                    kind: clankie_types::transcript::EntryKind::Message.wire(),
                },
                t,
            ))
            .await;
        self.note("mailbox.Report", outcome(r));
        let r = mailbox
            .hire(req(
                mailbox_pb::HireRequest {
                    project: "alpha".into(),
                    command: vec!["sleep".into(), "60".into()],
                    ..Default::default()
                },
                "",
            ))
            .await;
        self.note("mailbox.Hire", outcome(r));

        let mut mcp = mcphost_pb::mcp_host_client::McpHostClient::new(self.client("mcp-host"));
        let r = mcp
            .call_tool(req(
                mcphost_pb::CallToolRequest {
                    name: "linear_save_issue".into(),
                    arguments_json: json!({"team": "ENG", "title": "from the probe"}).to_string(),
                    receipt_id: "rcpt-probe-call".into(),
                    ..Default::default()
                },
                t,
            ))
            .await;
        self.note("mcp-host.CallTool", outcome(r));
        let r = mcp
            .call_tool_events(req(
                mcphost_pb::CallToolRequest {
                    name: "linear_save_issue".into(),
                    arguments_json: json!({"team": "ENG", "title": "from the probe"}).to_string(),
                    receipt_id: "rcpt-probe-events".into(),
                    progress: true,
                    log_level: "debug".into(),
                    ..Default::default()
                },
                t,
            ))
            .await;
        self.note("mcp-host.CallToolEvents", outcome(r));
        // Another caller's log lines: the feed is the gateway's alone.
        let r = mcp
            .watch_logs(req(mcphost_pb::WatchLogsRequest {}, t))
            .await;
        self.note("mcp-host.WatchLogs", outcome(r));
        let r = mcp
            .get_receipt(req(
                mcphost_pb::GetReceiptRequest {
                    receipt_id: "rcpt-probe-call".into(),
                },
                t,
            ))
            .await;
        self.note("mcp-host.GetReceipt", outcome(r));
        let r = mcp
            .search_tools(req(
                mcphost_pb::SearchToolsRequest {
                    query: String::new(),
                    limit: 20,
                },
                t,
            ))
            .await;
        self.note("mcp-host.SearchTools", outcome(r));

        let mut tracker = tracker_pb::tracker_client::TrackerClient::new(self.client("tracker"));
        let r = tracker
            .invoke(req(
                tracker_pb::InvokeRequest {
                    tool: "save_issue".into(),
                    arguments_json: json!({"team": "ENG", "title": "from the probe"}).to_string(),
                    actor: "owner".into(),
                    role: clankie_types::Role::Owner.wire(),
                    scope_team: String::new(),
                    linear_route: None,
                },
                "",
            ))
            .await;
        self.note("tracker.Invoke", outcome(r));

        let mut auto = auto_pb::auto_client::AutoClient::new(self.client("auto"));
        let r = auto
            .set_switch(req(
                auto_pb::SetSwitchRequest {
                    on: Some(true),
                    level: None,
                },
                "",
            ))
            .await;
        self.note("auto.SetSwitch", outcome(r));

        for (service, health) in [
            ("admission", "clankie.admission.v1.Admission"),
            ("mcp-host", "clankie.mcphost.v1.McpHost"),
            ("tracker", "clankie.tracker.v1.Tracker"),
            ("mailbox", "clankie.mailbox.v1.Mailbox"),
            ("auto", "clankie.auto.v1.Auto"),
            ("gateway", "clankie.gateway.v1.Gateway"),
        ] {
            let path = self.run.join(format!("{service}.sock"));
            let r = clankie_runtime::clients::health(&path, health, self.meta.clone()).await;
            let result = outcome(r.map(tonic::Response::new));
            self.note(&format!("{service}.Health"), result);
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(state), Some(victim), Some(out)) = (args.next(), args.next(), args.next()) else {
        anyhow::bail!("usage: clankie-probe STATE_DIR VICTIM_PID OUT [owner]");
    };
    let as_owner = args.next().as_deref() == Some("owner");
    let state = Path::new(&state);
    let meta = if as_owner {
        Meta::owner(std::fs::read_to_string(state.join("owner.token"))?.trim())
    } else {
        Meta::default()
    };
    let mut probe = Probe {
        run: state.join("run"),
        meta,
        results: BTreeMap::new(),
    };
    let ticket = probe.pid_naming(victim.parse()?).await;
    if !as_owner {
        probe.everything(&ticket).await;
    }
    let tmp = format!("{out}.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&probe.results)?)?;
    std::fs::rename(tmp, out)?;
    Ok(())
}
