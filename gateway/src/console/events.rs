//! `GET /console/events`: the console's live feed, as server-sent events.
//!
//! A `snapshot` event whenever the picture changes. The feed looks again
//! when the gateway sees something happen (a call ends, a switch turns, the
//! catalog or the settings change) and every [`TICK`] for what happens
//! elsewhere (a hire started from the CLI), but never more often than
//! [`MIN_GAP`] per feed, so a busy fleet cannot make the consoles hammer
//! the services. A sign-out ends the feed with `signed-out`; the gateway
//! stopping ends it at once.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream};
use serde_json::Value;
use tokio::time::Instant;

use super::session::OwnerClients;
use crate::Shared;

/// How often the feed looks when nothing here nudged it.
pub(crate) const TICK: Duration = Duration::from_secs(2);
/// The least time between two looks of one feed.
pub(crate) const MIN_GAP: Duration = Duration::from_millis(100);

pub(crate) async fn events(
    State(shared): State<Arc<Shared>>,
    headers: http::HeaderMap,
) -> Response {
    let Some(owner) = shared.console.sign_ins.find(&headers) else {
        return super::pages::signed_out();
    };
    let feed = Feed {
        nudges: shared.console.subscribe(),
        stopping: shared.drain.begun.clone(),
        shared,
        headers,
        owner,
        last: None,
        looked: None,
        ended: false,
    };
    Sse::new(feed.into_stream())
        .keep_alive(KeepAlive::default())
        .into_response()
}

struct Feed {
    shared: Arc<Shared>,
    headers: http::HeaderMap,
    owner: OwnerClients,
    nudges: tokio::sync::watch::Receiver<u64>,
    stopping: tokio_util::sync::CancellationToken,
    /// The last snapshot sent, without its time.
    last: Option<Value>,
    looked: Option<Instant>,
    ended: bool,
}

impl Feed {
    fn into_stream(self) -> impl Stream<Item = Result<Event, Infallible>> {
        stream::unfold(self, |mut feed| async move {
            let event = feed.next().await?;
            Some((Ok(event), feed))
        })
    }

    /// The next event to send, or None when the feed ends.
    async fn next(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        loop {
            if self.looked.is_some() && !self.wait().await {
                return None;
            }
            self.looked = Some(Instant::now());
            if !self.shared.console.sign_ins.is_open(&self.headers) {
                self.ended = true;
                return Some(Event::default().event("signed-out").data("{}"));
            }
            let mut snap = super::snapshot::snapshot(&self.shared.health, &self.owner).await;
            let at = snap.as_object_mut().and_then(|o| o.remove("atMs"));
            if self.last.as_ref() == Some(&snap) {
                continue;
            }
            self.last = Some(snap.clone());
            if let (Some(o), Some(at)) = (snap.as_object_mut(), at) {
                o.insert("atMs".into(), at);
            }
            return Some(Event::default().event("snapshot").data(snap.to_string()));
        }
    }

    /// Waits for a nudge or the tick, then out the least gap; false when
    /// the gateway is stopping.
    async fn wait(&mut self) -> bool {
        tokio::select! {
            _ = self.stopping.cancelled() => return false,
            _ = self.nudges.changed() => {}
            _ = tokio::time::sleep(TICK) => {}
        }
        if let Some(looked) = self.looked {
            tokio::select! {
                _ = self.stopping.cancelled() => return false,
                _ = tokio::time::sleep_until(looked + MIN_GAP) => {}
            }
        }
        true
    }
}
