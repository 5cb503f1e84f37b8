//! A machine's one long-lived stream, on the main stack's side.
//!
//! Opened only for a key admission knows as an enrolled machine; admission
//! is held (`HoldMachineLink`) for exactly as long as the stream lives, so
//! the machine's link is up there while, and only while, this stream is.
//! The main stack pings every [`PING`]; a machine silent for [`SILENT`] is
//! taken for gone (a cut cable sends no reset). Removing the machine ends
//! the hold, and this stream with it, with admission's reason.

use std::sync::Arc;
use std::time::Instant;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::relay::v1 as relay_pb;
use clankie_runtime::ErrorCode;
use clankie_runtime::clients::{Call, INTERNAL};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Status, Streaming};

use clankie_types::fleet::FleetTool;

use crate::Shared;
use crate::doors::Admitted;
use crate::fleet::Op;
use crate::mcp::dispatch::{dispatch, refused};
use crate::uplink::{PING, SILENT};

/// Most relayed requests one machine has in flight, across every link it
/// opens; past it a request is refused (retryable), not queued.
pub(crate) const MAX_RELAYED: usize = 64;
/// How long an answer may wait for room on the stream before it is given
/// up (the machine answers its caller `uncertain` by then).
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How many pings may be out at once for a round trip to be measured.
const PINGS_OUT: usize = 8;

/// What the machine reads from its link.
pub(crate) type Downs = ReceiverStream<Result<relay_pb::Down, Status>>;

fn down(kind: relay_pb::down::Kind) -> Result<relay_pb::Down, Status> {
    Ok(relay_pb::Down { kind: Some(kind) })
}

/// Opens the link of the machine whose key is `key`, or refuses it.
pub(crate) async fn open(
    shared: &Arc<Shared>,
    key: String,
    ups: Streaming<relay_pb::Up>,
    shutdown: CancellationToken,
    places: impl FnOnce(&str) -> Arc<tokio::sync::Semaphore>,
) -> Result<Downs, Status> {
    let (report_tx, report_rx) = mpsc::channel(4);
    let _ = report_tx
        .send(admission_pb::LinkReport {
            key_sha256: key.clone(),
            rtt_ms: 0,
            in_flight: 0,
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
    let relayed = Relayed {
        shared: shared.clone(),
        places: places(&key),
        key,
        ended: CancellationToken::new(),
    };
    tokio::spawn(async move {
        let reason = keep(ups, &mut held, &down_tx, &report_tx, &relayed, &shutdown).await;
        // Requests still running on this link can no longer be answered
        // on it: they end with it (a call's receipt settles as ever).
        relayed.ended.cancel();
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
    relayed: &Relayed,
    shutdown: &CancellationToken,
) -> &'static str {
    let mut tick = tokio::time::interval(PING);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    let mut nonce = 0u64;
    let mut sent: std::collections::VecDeque<(u64, Instant)> = Default::default();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if heard.elapsed() > SILENT {
                    return "silent";
                }
                nonce += 1;
                if sent.len() == PINGS_OUT {
                    sent.pop_front();
                }
                sent.push_back((nonce, Instant::now()));
                let ping = relay_pb::down::Kind::Ping(relay_pb::Ping { nonce });
                // Never waits: a machine that stops reading is as gone as a
                // silent one, and must not stall this loop.
                match down_tx.try_send(down(ping)) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => return "backlogged",
                    Err(mpsc::error::TrySendError::Closed(_)) => return "closed",
                }
            }
            up = ups.message() => match up {
                Ok(Some(relay_pb::Up { kind: Some(relay_pb::up::Kind::Pong(p)) })) => {
                    heard = Instant::now();
                    if let Some(i) = sent.iter().position(|(n, _)| *n == p.nonce) {
                        let at = sent[i].1;
                        sent.drain(..=i);
                        let rtt_ms = u32::try_from(at.elapsed().as_millis()).unwrap_or(u32::MAX);
                        let _ = report_tx.try_send(admission_pb::LinkReport {
                            key_sha256: String::new(),
                            rtt_ms,
                            in_flight: relayed.in_flight(),
                        });
                    }
                }
                Ok(Some(relay_pb::Up { kind: Some(relay_pb::up::Kind::Request(r)) })) => {
                    heard = Instant::now();
                    relayed.serve(r, down_tx.clone());
                }
                Ok(Some(_)) => heard = Instant::now(),
                _ => return "closed",
            },
            m = held.message() => match m {
                Ok(Some(_)) => {}
                // Admission's reason (the machine was removed, or a newer
                // link replaced this one) goes to the machine as it came.
                Err(s) => {
                    let _ = down_tx.try_send(Err(from_admission(&s)));
                    return "ended by admission";
                }
                Ok(None) => return "ended by admission",
            },
            () = down_tx.closed() => return "closed",
            () = shutdown.cancelled() => return "stopping",
        }
    }
}

/// Serves the requests a machine relays for its panes.
struct Relayed {
    shared: Arc<Shared>,
    /// The key the link's TLS connection proved: each request is admitted
    /// as this machine's, and only while its link is up.
    key: String,
    /// The machine's places, shared by all its links.
    places: Arc<tokio::sync::Semaphore>,
    /// Cancelled when this link ends.
    ended: CancellationToken,
}

impl Relayed {
    /// How many of the machine's requests are being served.
    fn in_flight(&self) -> u32 {
        u32::try_from(MAX_RELAYED - self.places.available_permits()).unwrap_or(u32::MAX)
    }

    /// Answers `r` on `down_tx`, in its own task.
    fn serve(&self, r: relay_pb::Relayed, down_tx: mpsc::Sender<Result<relay_pb::Down, Status>>) {
        let id = r.id;
        // Named only as a tool this build knows: the machine's string never
        // becomes a metric label or a log field.
        let tool = FleetTool::parse(&r.tool).map_or("other", FleetTool::name);
        let ended = self.ended.clone();
        let Ok(place) = self.places.clone().try_acquire_owned() else {
            let full = ErrorCode::TooManyConnections
                .err("this machine has the most relayed requests in flight; nothing was forwarded, retry shortly");
            let refusal = refused(&full);
            counted(tool, &refusal);
            tokio::spawn(async move {
                let _ = tokio::time::timeout(ANSWER_WAIT, down_tx.send(answer(id, &refusal))).await;
            });
            return;
        };
        let (shared, key) = (self.shared.clone(), self.key.clone());
        tokio::spawn(async move {
            let _place = place;
            let result = tokio::select! {
                r = relayed(&shared, key, tool, r) => r,
                () = ended.cancelled() => return,
            };
            counted(tool, &result);
            let _ = tokio::time::timeout(ANSWER_WAIT, down_tx.send(answer(id, &result))).await;
        });
    }
}

/// The answer to request `id`. One too large for the stream is refused on
/// its own rather than sent to end the link.
fn answer(id: u64, result: &rmcp::model::CallToolResult) -> Result<relay_pb::Down, Status> {
    let mut result_json = serde_json::to_string(result).unwrap_or_default();
    if result_json.len() > super::listen::MAX_MESSAGE - 1024 {
        let e = ErrorCode::PayloadTooLarge.err(
            "the answer is larger than a relay link carries; the call's receipt holds its outcome",
        );
        result_json = serde_json::to_string(&refused(&e)).unwrap_or_default();
    }
    down(relay_pb::down::Kind::Answer(relay_pb::RelayedAnswer {
        id,
        result_json,
    }))
}

/// Counts a relayed request by tool and whether it was answered or
/// refused (`clankie.relay.requests`).
fn counted(tool: &'static str, result: &rmcp::model::CallToolResult) {
    use std::sync::OnceLock;
    static REQUESTS: OnceLock<opentelemetry::metrics::Counter<u64>> = OnceLock::new();
    let requests = REQUESTS.get_or_init(|| {
        clankie_runtime::telemetry::metrics::meter()
            .u64_counter("clankie.relay.requests")
            .with_description("Requests remote machines relayed, by tool and result.")
            .with_unit("{request}")
            .build()
    });
    let result = if result.is_error == Some(true) {
        "refused"
    } else {
        "answered"
    };
    requests.add(
        1,
        &[
            opentelemetry::KeyValue::new("tool", tool),
            opentelemetry::KeyValue::new("result", result),
        ],
    );
}

/// One relayed request: admitted as the machine's pane, then run as any
/// member's fleet tool call.
async fn relayed(
    shared: &Shared,
    key: String,
    tool_name: &'static str,
    r: relay_pb::Relayed,
) -> rmcp::model::CallToolResult {
    use tracing::Instrument as _;
    let span = tracing::info_span!("relay.request", tool = tool_name, otel.kind = "server");
    clankie_runtime::telemetry::adopt_map_parent(&span, &r.trace);
    async move {
        let Some(tool) = FleetTool::parse(&r.tool).filter(|t| crate::uplink::crosses(*t)) else {
            return refused(&ErrorCode::UnknownTool.err("only clankie_tools and clankie_call cross a relay link"));
        };
        let args: serde_json::Value = match serde_json::from_str(&r.args_json) {
            Ok(a) => a,
            Err(e) => return refused(&ErrorCode::ArgumentsInvalid.err(format!("{} arguments: {e}", tool.name()))),
        };
        let call = Call::new(admission_pb::AdmitRelayRequest {
            key_sha256: key,
            pane_id: r.pane_id,
        })
        .timeout(INTERNAL)
        .request();
        let admitted = match shared.admission.clone().admit_relay(call).await {
            Ok(resp) => Admitted::from_admission(resp.into_inner()),
            Err(s) => {
                return refused(&crate::doors::admission_refusal(
                    &s,
                    "fleet admission is unavailable right now; nothing was forwarded, retry shortly",
                ));
            }
        };
        let op = Op::new(shared, &admitted);
        dispatch(&op, tool, args, None).await
    }
    .instrument(span)
    .await
}
