//! The seat routes (`types::fleet::seat::SeatRoute`): a seat's mailbox long
//! poll (which also carries its catalog revision), delivery claims, acks and
//! releases, the catalog-only long poll, peer messages and landing review.
//! Every route was admitted by a door; the path's pane must be the pane
//! admission proved for this connection, and the mailbox then requires the
//! native seat proof. Each handler parses its path and body and runs one
//! fleet operation.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Path, Query, State};
use axum::response::Response;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::args::{Submission, VerdictArgs};
use clankie_types::fleet::seat::{Claim, DeliveryRef, SendPeer};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::{json_or_refusal, refusal};
use crate::Shared;
use crate::doors::Admitted;
use crate::fleet::Op;
use crate::fleet::deliveries::MAX_WAIT;

/// A long poll's query: how long to wait, the revision the bridge holds.
#[derive(Deserialize)]
pub(crate) struct Wait {
    wait: Option<u64>,
    revision: Option<String>,
    /// The mailbox poll only: the bridge's tools, comma-separated.
    tools: Option<String>,
}

impl Wait {
    fn wait(&self) -> Duration {
        Duration::from_millis(self.wait.unwrap_or(0)).min(MAX_WAIT)
    }
}

/// The path's pane must be the pane this connection was proven for.
fn check_pane(a: &Admitted, pane: &str) -> Result<(), ClankieError> {
    if a.principal.pane_id.is_empty() {
        return Err(ErrorCode::NativeSeatRequired
            .err("seat routes need a native seat; bearer links have none"));
    }
    if a.principal.pane_id != pane {
        return Err(ErrorCode::NativeSeatRequired.err(format!(
            "this connection was proven for pane {}, not {pane}",
            a.principal.pane_id
        )));
    }
    Ok(())
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ClankieError> {
    serde_json::from_slice(body)
        .map_err(|e| ErrorCode::InvalidArgument.err(format!("malformed body: {e}")))
}

/// A seat route: the path's pane is checked, then `answer` runs.
async fn seat_route<T, Fut>(a: &Admitted, pane: &str, answer: Fut) -> Response
where
    T: serde::Serialize,
    Fut: Future<Output = Result<T, ClankieError>>,
{
    if let Err(e) = check_pane(a, pane) {
        return refusal(&e);
    }
    json_or_refusal(answer.await)
}

/// A seat POST route with a JSON body of type `B`: the pane is checked
/// before the body is read.
async fn seat_post<B, T, F, Fut>(a: &Admitted, pane: &str, body: &[u8], answer: F) -> Response
where
    B: DeserializeOwned,
    T: serde::Serialize,
    F: FnOnce(B) -> Fut,
    Fut: Future<Output = Result<T, ClankieError>>,
{
    if let Err(e) = check_pane(a, pane) {
        return refusal(&e);
    }
    match parse(body) {
        Ok(b) => json_or_refusal(answer(b).await),
        Err(e) => refusal(&e),
    }
}

pub(crate) async fn mailbox(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    Query(q): Query<Wait>,
) -> Response {
    let wait = q.wait();
    let op = Op::polling(&shared, &a, wait);
    let known = q.revision.unwrap_or_default();
    let tools = q.tools.unwrap_or_default();
    seat_route(&a, &pane, op.poll(wait, known, &tools)).await
}

pub(crate) async fn tool_catalog(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    Query(q): Query<Wait>,
) -> Response {
    let op = Op::new(&shared, &a);
    let known = q.revision.clone().unwrap_or_default();
    seat_route(&a, &pane, async {
        Ok(op.catalog_revision(q.wait(), &known).await)
    })
    .await
}

pub(crate) async fn claim(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_post(&a, &pane, &body, |c: Claim| op.claim(c.delivery_ids)).await
}

pub(crate) async fn ack(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_post(&a, &pane, &body, |d: DeliveryRef| {
        op.ack(d.delivery_id, d.claim_id)
    })
    .await
}

pub(crate) async fn release(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_post(&a, &pane, &body, |d: DeliveryRef| {
        op.release(d.delivery_id, d.claim_id)
    })
    .await
}

pub(crate) async fn peers(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_route(&a, &pane, op.peers()).await
}

pub(crate) async fn peer_message(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_post(&a, &pane, &body, |s: SendPeer| {
        op.send_peer(s.seat, s.text, s.receipt_id)
    })
    .await
}

pub(crate) async fn peer_receipt(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path((pane, id)): Path<(String, String)>,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_route(&a, &pane, op.peer_receipt(id)).await
}

pub(crate) async fn submit_review(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_post(&a, &pane, &body, |s: Submission| op.submit(s)).await
}

pub(crate) async fn review_candidate(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path((pane, id)): Path<(String, String)>,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_route(&a, &pane, op.candidate(id)).await
}

pub(crate) async fn review_verdict(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let op = Op::new(&shared, &a);
    seat_post(&a, &pane, &body, |v: VerdictArgs| op.verdict(v)).await
}
