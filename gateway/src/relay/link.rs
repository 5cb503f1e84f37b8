//! A machine's one long-lived stream, on the main stack's side.
//!
//! Opened only for a key admission knows as an enrolled machine; admission
//! is held (`HoldMachineLink`) for exactly as long as the stream lives, so
//! the machine's link is up there while, and only while, this stream is.
//! The main stack pings every [`PING`]; a machine silent for [`SILENT`] is
//! taken for gone (a cut cable sends no reset). Removing the machine ends
//! the hold, and this stream with it, with admission's reason.

use std::time::{Duration, Instant};

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::relay::v1 as relay_pb;
use clankie_runtime::ErrorCode;
use clankie_runtime::clients::{Call, INTERNAL};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Status, Streaming};

use crate::Shared;

/// How often the main stack pings a machine.
pub(crate) const PING: Duration = Duration::from_millis(500);
/// How long a silent link lives.
pub(crate) const SILENT: Duration = Duration::from_millis(1500);

/// What the machine reads from its link.
pub(crate) type Downs = ReceiverStream<Result<relay_pb::Down, Status>>;

fn down(kind: relay_pb::down::Kind) -> Result<relay_pb::Down, Status> {
    Ok(relay_pb::Down { kind: Some(kind) })
}

/// Opens the link of the machine whose key is `key`, or refuses it.
pub(crate) async fn open(
    shared: &Shared,
    key: String,
    ups: Streaming<relay_pb::Up>,
    shutdown: CancellationToken,
) -> Result<Downs, Status> {
    let (report_tx, report_rx) = mpsc::channel(4);
    let _ = report_tx
        .send(admission_pb::LinkReport {
            key_sha256: key,
            rtt_ms: 0,
        })
        .await;
    let mut admission = shared.admission.clone();
    let hold = admission.hold_machine_link(Call::new(ReceiverStream::new(report_rx)).request());
    let mut held = match tokio::time::timeout(INTERNAL, hold).await {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(s)) => return Err(from_admission(&s)),
        Err(_) => return Err(unavailable()),
    };
    let machine = match tokio::time::timeout(INTERNAL, held.message()).await {
        Ok(Ok(Some(m))) => m,
        Ok(Err(s)) => return Err(from_admission(&s)),
        _ => return Err(unavailable()),
    };
    let (down_tx, down_rx) = mpsc::channel(8);
    let _ = down_tx
        .send(down(relay_pb::down::Kind::Linked(relay_pb::Linked {
            machine: machine.name.clone(),
            fleet: machine.fleet.clone(),
        })))
        .await;
    tracing::info!(fleet = %machine.fleet, machine = %machine.name, "relay.link.up");
    tokio::spawn(async move {
        let reason = keep(ups, &mut held, &down_tx, &report_tx, &shutdown).await;
        tracing::info!(machine = %machine.name, reason, "relay.link.down");
        // Dropping the reports ends admission's hold: the link is down
        // there now.
    });
    Ok(ReceiverStream::new(down_rx))
}

/// What admission's failure to answer tells the machine.
const UNAVAILABLE: &str =
    "fleet admission is unavailable right now; the link is refused, retry shortly";

fn unavailable() -> Status {
    clankie_runtime::refuse::gateway(ErrorCode::FleetAdmissionUnavailable.err(UNAVAILABLE))
}

/// Admission's verdict as it came, or unavailable when it gave none.
fn from_admission(s: &Status) -> Status {
    super::passed_on(crate::doors::admission_refusal(s, UNAVAILABLE))
}

/// Pings the machine, reports each round trip to admission, and returns
/// why the link ended.
async fn keep(
    mut ups: Streaming<relay_pb::Up>,
    held: &mut Streaming<admission_pb::Machine>,
    down_tx: &mpsc::Sender<Result<relay_pb::Down, Status>>,
    report_tx: &mpsc::Sender<admission_pb::LinkReport>,
    shutdown: &CancellationToken,
) -> &'static str {
    let mut tick = tokio::time::interval(PING);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    let mut nonce = 0u64;
    let mut sent: Option<(u64, Instant)> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if heard.elapsed() > SILENT {
                    return "silent";
                }
                nonce += 1;
                sent = Some((nonce, Instant::now()));
                let ping = relay_pb::down::Kind::Ping(relay_pb::Ping { nonce });
                if down_tx.send(down(ping)).await.is_err() {
                    return "closed";
                }
            }
            up = ups.message() => match up {
                Ok(Some(relay_pb::Up { kind: Some(relay_pb::up::Kind::Pong(p)) })) => {
                    heard = Instant::now();
                    if let Some((n, at)) = sent
                        && n == p.nonce
                    {
                        let rtt_ms = u32::try_from(at.elapsed().as_millis()).unwrap_or(u32::MAX);
                        let _ = report_tx.try_send(admission_pb::LinkReport {
                            key_sha256: String::new(),
                            rtt_ms,
                        });
                        sent = None;
                    }
                }
                Ok(Some(_)) => heard = Instant::now(),
                _ => return "closed",
            },
            m = held.message() => match m {
                Ok(Some(_)) => {}
                // Admission's reason (the machine was removed, or a newer
                // link replaced this one) goes to the machine as it came.
                Err(s) => {
                    let _ = down_tx.send(Err(from_admission(&s))).await;
                    return "ended by admission";
                }
                Ok(None) => return "ended by admission",
            },
            () = down_tx.closed() => return "closed",
            () = shutdown.cancelled() => return "stopping",
        }
    }
}
