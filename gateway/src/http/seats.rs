//! The seat routes (`types::fleet::seat::SeatRoute`): a seat's mailbox long
//! poll (which also carries its catalog revision), delivery claims, acks and
//! releases, the catalog-only long poll, peer messages and landing review.
//! Every route was admitted by a door; the [`Seat`] extractor holds the
//! path's pane to the pane admission proved for this connection (the
//! mailbox then requires the native seat proof), so each handler only
//! parses its body and runs one fleet operation.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
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

/// The caller of a seat route: what its door admitted, for the pane its
/// path names, which is the pane admission proved for this connection.
pub(crate) struct Seat {
    shared: Arc<Shared>,
    admitted: Admitted,
    /// The path's `{id}`, on the routes that name one.
    id: String,
}

impl Seat {
    fn op(&self) -> Op<'_> {
        Op::new(&self.shared, &self.admitted)
    }
}

impl FromRequestParts<Arc<Shared>> for Seat {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, shared: &Arc<Shared>) -> Result<Self, Response> {
        let admitted = parts.extensions.get::<Admitted>().cloned().ok_or_else(|| {
            refusal(&ErrorCode::Internal.err("a seat route was reached without a door"))
        })?;
        let Path(mut params) = Path::<HashMap<String, String>>::from_request_parts(parts, shared)
            .await
            .map_err(IntoResponse::into_response)?;
        let pane = params.remove("pane").unwrap_or_default();
        check_pane(&admitted, &pane).map_err(|e| refusal(&e))?;
        Ok(Seat {
            shared: shared.clone(),
            admitted,
            id: params.remove("id").unwrap_or_default(),
        })
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

/// A POST's JSON body of type `B`, answered by `answer`.
async fn posted<B, T, F, Fut>(body: &[u8], answer: F) -> Response
where
    B: DeserializeOwned,
    T: serde::Serialize,
    F: FnOnce(B) -> Fut,
    Fut: Future<Output = Result<T, ClankieError>>,
{
    match serde_json::from_slice(body) {
        Ok(b) => json_or_refusal(answer(b).await),
        Err(e) => refusal(&ErrorCode::InvalidArgument.err(format!("malformed body: {e}"))),
    }
}

pub(crate) async fn mailbox(seat: Seat, Query(q): Query<Wait>) -> Response {
    let wait = q.wait();
    let op = Op::polling(&seat.shared, &seat.admitted, wait);
    let known = q.revision.unwrap_or_default();
    let tools = q.tools.unwrap_or_default();
    json_or_refusal(op.poll(wait, known, &tools).await)
}

pub(crate) async fn tool_catalog(seat: Seat, Query(q): Query<Wait>) -> Response {
    let known = q.revision.clone().unwrap_or_default();
    axum::Json(seat.op().catalog_revision(q.wait(), &known).await).into_response()
}

pub(crate) async fn claim(seat: Seat, body: Bytes) -> Response {
    let op = seat.op();
    posted(&body, |c: Claim| op.claim(c.delivery_ids)).await
}

pub(crate) async fn ack(seat: Seat, body: Bytes) -> Response {
    let op = seat.op();
    posted(&body, |d: DeliveryRef| op.ack(d.delivery_id, d.claim_id)).await
}

pub(crate) async fn release(seat: Seat, body: Bytes) -> Response {
    let op = seat.op();
    posted(&body, |d: DeliveryRef| {
        op.release(d.delivery_id, d.claim_id)
    })
    .await
}

pub(crate) async fn peers(seat: Seat) -> Response {
    json_or_refusal(seat.op().peers().await)
}

pub(crate) async fn peer_message(seat: Seat, body: Bytes) -> Response {
    let op = seat.op();
    posted(&body, |s: SendPeer| {
        op.send_peer(s.seat, s.text, s.receipt_id)
    })
    .await
}

pub(crate) async fn peer_receipt(seat: Seat) -> Response {
    json_or_refusal(seat.op().peer_receipt(seat.id.clone()).await)
}

pub(crate) async fn report_receipt(seat: Seat) -> Response {
    json_or_refusal(seat.op().report_receipt(seat.id.clone()).await)
}

pub(crate) async fn submit_review(seat: Seat, body: Bytes) -> Response {
    let op = seat.op();
    posted(&body, |s: Submission| op.submit(s)).await
}

pub(crate) async fn review_candidate(seat: Seat) -> Response {
    json_or_refusal(seat.op().candidate(seat.id.clone()).await)
}

pub(crate) async fn review_verdict(seat: Seat, body: Bytes) -> Response {
    let op = seat.op();
    posted(&body, |v: VerdictArgs| op.verdict(v)).await
}
