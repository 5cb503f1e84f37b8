//! The machine's side of its link: a remote stack enrolled with a main
//! stack (`relay/link.json`, written by `clankie fleet machine enrol`)
//! keeps one stream to it for as long as the gateway runs, and opens it
//! again after any drop, waiting between tries with backoff and full jitter
//! so a restarted main stack is not met by every machine at once.

use std::time::Duration;

use clankie_proto::relay::v1 as relay_pb;
use clankie_proto::relay::v1::relay_client::RelayClient;
use clankie_runtime::clients::Call;
use clankie_runtime::paths::StatePaths;
use clankie_runtime::relay_tls::{self, Identity};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

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
pub(crate) async fn keep(paths: StatePaths, shutdown: CancellationToken) -> anyhow::Result<()> {
    let file = paths.relay_link();
    let link: LinkFile = match std::fs::read(&file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            tracing::error!(error = %e, "relay link file unreadable; no link to the main stack");
            return Ok(());
        }
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "relay link file unreadable; no link to the main stack");
                return Ok(());
            }
        },
    };
    let identity = match Identity::load_or_create(&paths.relay_identity(), "clankie-machine") {
        Ok(i) => i,
        Err(e) => {
            tracing::error!(error = %e, "relay identity unreadable; no link to the main stack");
            return Ok(());
        }
    };
    let channel = relay_tls::channel(&link.main, &identity, &link.pin)?;
    let mut wait = FIRST_WAIT;
    loop {
        match hold(channel.clone(), &shutdown).await {
            Ended::Stopping => return Ok(()),
            Ended::AfterUp(why) => {
                tracing::info!(reason = why, "relay.link.down");
                wait = FIRST_WAIT;
            }
            Ended::Refused(reason) => {
                tracing::info!(reason = %reason, "relay.link.refused");
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

/// Opens the link and answers its pings until it ends.
async fn hold(channel: tonic::transport::Channel, shutdown: &CancellationToken) -> Ended {
    let (up_tx, up_rx) = mpsc::channel(8);
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
            d = tokio::time::timeout(super::link::SILENT, downs.message()) => d,
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
                tracing::info!(machine = %l.machine, fleet = %l.fleet, "relay.link.up");
            }
            relay_pb::down::Kind::Ping(p) => {
                let pong = relay_pb::Up {
                    kind: Some(relay_pb::up::Kind::Pong(relay_pb::Pong { nonce: p.nonce })),
                };
                if up_tx.send(pong).await.is_err() {
                    return ended(up, "closed", String::new());
                }
            }
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
