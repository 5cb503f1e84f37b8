//! The machine's side of its link (the main stack's side is `relay/`): a remote stack enrolled with a main
//! stack (`relay/link.json`, written by `clankie fleet machine enrol`)
//! keeps one stream to it for as long as the gateway runs, and opens it
//! again after any drop, waiting between tries with backoff and full jitter
//! so a restarted main stack is not met by every machine at once.
//!
//! The [`Outbox`] is what the MCP face sends its panes' connected-tool
//! requests through (`mcp/relayed.rs`): each waits for its answer by id, and
//! every request still waiting when the link drops is answered as lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clankie_proto::relay::v1 as relay_pb;
use clankie_proto::relay::v1::relay_client::RelayClient;
use clankie_runtime::clients::Call;
use clankie_runtime::paths::StatePaths;
use clankie_runtime::relay_tls::{self, Identity};
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// How often the main stack pings a machine's link.
pub(crate) const PING: Duration = Duration::from_millis(500);
/// How long a silent link lives, on either side.
pub(crate) const SILENT: Duration = Duration::from_millis(1500);

/// Whether `tool` is served by the main stack for a machine's panes: the
/// connected tools, which are connected there. Everything else (seats,
/// peers, reports) stays with the machine's own stack.
pub(crate) fn crosses(tool: clankie_types::fleet::FleetTool) -> bool {
    use clankie_types::fleet::FleetTool;
    matches!(tool, FleetTool::Tools | FleetTool::Call)
}

/// The first wait after a drop, and the longest.
const FIRST_WAIT: Duration = Duration::from_millis(250);
const LONGEST_WAIT: Duration = Duration::from_secs(30);
/// How long opening the link may take.
const OPEN: Duration = Duration::from_secs(10);

/// `relay/link.json`, as far as the link needs it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LinkFile {
    main: String,
    pin: String,
}

/// Why a relayed request has no answer.
pub(crate) enum Unanswered {
    /// The link is down: nothing was sent.
    NotSent,
    /// Sent, and the link dropped (or the time ran out) before the answer.
    Lost,
}

/// This machine's link as the MCP face sees it.
pub(crate) struct Outbox {
    /// Where the main stack is and the pin; none when the link file cannot
    /// be read (then nothing is relayed, and nothing is served here in its
    /// place either).
    target: Option<LinkFile>,
    /// The current link's sender, while it is up.
    up: Mutex<Option<mpsc::Sender<relay_pb::Up>>>,
    waiting: Mutex<HashMap<u64, oneshot::Sender<String>>>,
    next: AtomicU64,
}

impl Outbox {
    /// The outbox of an enrolled stack; none when this stack is not
    /// enrolled with a main stack.
    pub(crate) fn load(paths: &StatePaths) -> Option<Arc<Outbox>> {
        let target = match std::fs::read(paths.relay_link()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::error!(error = %e, "relay link file unreadable; nothing is relayed");
                None
            }
            Ok(bytes) => serde_json::from_slice(&bytes)
                .inspect_err(|e| {
                    tracing::error!(error = %e, "relay link file unreadable; nothing is relayed");
                })
                .ok(),
        };
        Some(Arc::new(Outbox {
            target,
            up: Mutex::new(None),
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }))
    }

    /// Sends `request` (its id set here) and waits up to `within` for its
    /// answer: the MCP tool result as JSON.
    pub(crate) async fn send(
        &self,
        mut request: relay_pb::Relayed,
        within: Duration,
    ) -> Result<String, Unanswered> {
        let Some(up) = self.up.lock().clone() else {
            return Err(Unanswered::NotSent);
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        request.id = id;
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(id, tx);
        // However this ends (answered, timed out, or its caller gone), its
        // place in `waiting` goes with it.
        let _waiting = Waiting { outbox: self, id };
        let up_msg = relay_pb::Up {
            kind: Some(relay_pb::up::Kind::Request(request)),
        };
        let began = tokio::time::Instant::now();
        match tokio::time::timeout(within, up.send(up_msg)).await {
            Ok(Ok(())) => {}
            // The link closed, or it is so backed up nothing left in time:
            // either way nothing was sent.
            Ok(Err(_)) | Err(_) => return Err(Unanswered::NotSent),
        }
        let left = within.saturating_sub(began.elapsed());
        match tokio::time::timeout(left, rx).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) | Err(_) => Err(Unanswered::Lost),
        }
    }

    fn forget(&self, id: u64) {
        self.waiting.lock().remove(&id);
    }

    fn went_up(&self, up: mpsc::Sender<relay_pb::Up>) {
        *self.up.lock() = Some(up);
    }

    /// The link dropped: every request still waiting is lost.
    fn went_down(&self) {
        *self.up.lock() = None;
        self.waiting.lock().clear();
    }

    fn answered(&self, answer: relay_pb::RelayedAnswer) {
        if let Some(tx) = self.waiting.lock().remove(&answer.id) {
            let _ = tx.send(answer.result_json);
        }
    }
}

/// Writes where the link stands to `run/fleet/uplink.json` when that
/// changed (so `doctor` and `fleet status` on this machine can say).
struct Said {
    path: std::path::PathBuf,
    main: String,
    last: Option<(String, String)>,
}

impl Said {
    fn say(&mut self, state: &str, reason: &str) {
        let now = (state.to_string(), reason.to_string());
        if self.last.as_ref() == Some(&now) {
            return;
        }
        let status = clankie_types::discovery::UplinkStatus {
            state: now.0.clone(),
            since_ms: clankie_runtime::now_ms(),
            reason: now.1.clone(),
            main: self.main.clone(),
            pid: std::process::id(),
        };
        if let Err(e) = clankie_runtime::state::save_json(&self.path, &status) {
            tracing::warn!(error = %e, "relay link state not written");
        }
        self.last = Some(now);
    }
}

/// A request's place among the waiting, removed on drop.
struct Waiting<'a> {
    outbox: &'a Outbox,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.outbox.forget(self.id);
    }
}

/// How a link ended.
enum Ended {
    /// It was up, then dropped: try again soon.
    AfterUp(&'static str),
    /// It never came up.
    Refused(String),
    Stopping,
}

/// Keeps this machine's link until `shutdown`; returns at once when this
/// stack is not enrolled with a main stack.
pub(crate) async fn keep(
    paths: StatePaths,
    outbox: Option<Arc<Outbox>>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let Some(outbox) = outbox else {
        return Ok(());
    };
    let mut said = Said {
        path: paths.uplink_status(),
        main: outbox
            .target
            .as_ref()
            .map(|l| l.main.clone())
            .unwrap_or_default(),
        last: None,
    };
    let Some(link) = outbox.target.as_ref() else {
        said.say("unreadable", "the link file relay/link.json cannot be read");
        return Ok(());
    };
    let identity = match Identity::load_or_create(&paths.relay_identity(), "clankie-machine") {
        Ok(i) => i,
        Err(e) => {
            tracing::error!(error = %e, "relay identity unreadable; no link to the main stack");
            said.say(
                "unreadable",
                "the key file relay/identity.json cannot be read",
            );
            return Ok(());
        }
    };
    let channel = relay_tls::channel(&link.main, &identity, &link.pin)?;
    let mut wait = FIRST_WAIT;
    loop {
        let ended = hold(channel.clone(), &outbox, &mut said, &shutdown).await;
        outbox.went_down();
        match ended {
            Ended::Stopping => return Ok(()),
            Ended::AfterUp(why) => {
                tracing::info!(reason = why, "relay.link.down");
                said.say("down", why);
                wait = FIRST_WAIT;
            }
            Ended::Refused(reason) => {
                // A connection that failed as a transport failure may have
                // failed on the pin: the main stack's key changed.
                let reason = if reason == "service_unavailable"
                    && relay_tls::check_pin(&link.main, &identity, &link.pin)
                        .await
                        .is_err_and(|e| {
                            e.code == clankie_runtime::ErrorCode::RelayCertificateMismatch
                        }) {
                    "relay_certificate_mismatch".to_string()
                } else {
                    reason
                };
                tracing::info!(reason = %reason, "relay.link.refused");
                said.say("refused", &reason);
            }
        }
        let jittered = wait.mul_f64(rand::random::<f64>());
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(jittered) => {}
        }
        wait = (wait * 2).min(LONGEST_WAIT);
    }
}

/// Opens the link and serves it (pongs, answers) until it ends.
async fn hold(
    channel: tonic::transport::Channel,
    outbox: &Outbox,
    said: &mut Said,
    shutdown: &CancellationToken,
) -> Ended {
    let (up_tx, up_rx) = mpsc::channel(64);
    let mut relay = RelayClient::new(channel);
    let opened = tokio::select! {
        () = shutdown.cancelled() => return Ended::Stopping,
        r = tokio::time::timeout(OPEN, relay.link(Call::new(ReceiverStream::new(up_rx)).request())) => r,
    };
    let mut downs = match opened {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(s)) => return Ended::Refused(reason(&s)),
        Err(_) => return Ended::Refused("timed out".into()),
    };
    let mut up = false;
    loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => return Ended::Stopping,
            d = tokio::time::timeout(SILENT, downs.message()) => d,
        };
        let kind = match next {
            Err(_) => return ended(up, "silent", String::new()),
            Ok(Ok(Some(relay_pb::Down { kind: Some(kind) }))) => kind,
            Ok(Ok(Some(_))) => continue,
            Ok(Ok(None)) => return ended(up, "closed", String::new()),
            Ok(Err(s)) => return ended(up, "refused", reason(&s)),
        };
        match kind {
            relay_pb::down::Kind::Linked(l) => {
                up = true;
                outbox.went_up(up_tx.clone());
                said.say("up", "");
                tracing::info!(machine = %l.machine, fleet = %l.fleet, "relay.link.up");
            }
            relay_pb::down::Kind::Ping(p) => {
                let pong = relay_pb::Up {
                    kind: Some(relay_pb::up::Kind::Pong(relay_pb::Pong { nonce: p.nonce })),
                };
                // Never waits: a stream so backed up that a pong finds no
                // room is as good as silent.
                match up_tx.try_send(pong) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        return ended(up, "backlogged", String::new());
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        return ended(up, "closed", String::new());
                    }
                }
            }
            relay_pb::down::Kind::Answer(a) => outbox.answered(a),
        }
    }
}

fn ended(up: bool, why: &'static str, reason: String) -> Ended {
    match (up, reason.is_empty()) {
        (true, true) => Ended::AfterUp(why),
        (_, false) => Ended::Refused(reason),
        (false, true) => Ended::Refused(why.to_string()),
    }
}

/// The reason code a refusal carries (the text stays out of the log).
#[allow(clippy::disallowed_methods, reason = "reads the main stack's verdict")]
fn reason(s: &tonic::Status) -> String {
    clankie_runtime::ClankieError::from_status(s)
        .code
        .as_str()
        .to_string()
}
