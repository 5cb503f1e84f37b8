//! The seat routes: a seat's mailbox long poll (which also carries its
//! catalog revision), delivery receipts, the catalog-only long poll, and the
//! peer message routes. Every route was admitted by the middleware; the path's
//! pane must be the pane admission proved for this connection, and the
//! mailbox then requires the native seat proof.
//!
//! - `GET  /v1/fleet/seats/{paneId}/mailbox?wait=MS&revision=R`
//! - `POST /v1/fleet/seats/{paneId}/mailbox/claim` `{deliveryIds}`
//! - `POST /v1/fleet/seats/{paneId}/mailbox/ack` `{deliveryId, claimId}`
//! - `POST /v1/fleet/seats/{paneId}/mailbox/release` `{deliveryId, claimId}`
//! - `GET  /v1/fleet/seats/{paneId}/tool-catalog?wait=MS&revision=R`
//! - `GET  /v1/fleet/seats/{paneId}/peers`
//! - `POST /v1/fleet/seats/{paneId}/peer-messages` `{seat, text, receiptId}`
//! - `GET  /v1/fleet/seats/{paneId}/peer-messages/{id}`

use clankie_runtime::clients::INTERNAL;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse, Response};
use clankie_proto::mailbox::v1 as pb;
use clankie_runtime::clients::Call;
use clankie_runtime::{ClankieError, ErrorCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Admitted, Shared, refusal};

/// The longest wait a seat may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(25);

/// The revision a seat's catalog has: the connected catalog and the fleet
/// settings (tools and peer messages) together.
pub(crate) fn seat_revision(shared: &Shared) -> String {
    format!(
        "{}.{}",
        shared.catalog.borrow().revision,
        shared.settings.borrow().revision
    )
}

#[derive(Deserialize)]
pub(crate) struct Wait {
    wait: Option<u64>,
    revision: Option<String>,
    /// The mailbox poll only: the bridge's tools, comma-separated.
    tools: Option<String>,
}

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

fn request<T>(shared: &Shared, a: &Admitted, msg: T, extra: Duration) -> tonic::Request<T> {
    Call::new(msg)
        .timeout(shared.request_budget + extra)
        .ticket(&a.ticket)
        .request()
}

fn failed(s: tonic::Status) -> Response {
    refusal(&ClankieError::from_status(&s))
}

fn grpc_err(s: tonic::Status) -> ClankieError {
    ClankieError::from_status(&s)
}

/// A seat route: the path's pane must be the connection's proven pane;
/// then `answer` runs and its JSON (or refusal) is the response.
async fn seat_route<F>(a: &Admitted, pane: &str, answer: F) -> Response
where
    F: std::future::Future<Output = Result<Value, ClankieError>>,
{
    if let Err(e) = check_pane(a, pane) {
        return refusal(&e);
    }
    match answer.await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => refusal(&e),
    }
}

/// A seat POST route with a JSON body of type `B`.
async fn seat_post<B, F, Fut>(a: &Admitted, pane: &str, body: &[u8], answer: F) -> Response
where
    B: for<'de> Deserialize<'de>,
    F: FnOnce(B) -> Fut,
    Fut: std::future::Future<Output = Result<Value, ClankieError>>,
{
    if let Err(e) = check_pane(a, pane) {
        return refusal(&e);
    }
    let body: B = match parse(body) {
        Ok(v) => v,
        Err(e) => return refusal(&e),
    };
    match answer(body).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => refusal(&e),
    }
}

/// Waits until the seat revision differs from `known`, or `wait` passes.
async fn revision_change(shared: &Shared, known: &str, wait: Duration) -> String {
    let mut catalog = shared.catalog.subscribe();
    let mut settings = shared.settings.subscribe();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let now = seat_revision(shared);
        if now != known || tokio::time::Instant::now() >= deadline {
            return now;
        }
        tokio::select! {
            _ = catalog.changed() => {}
            _ = settings.changed() => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Whether the seat's agent is mid-turn (Herdr `working` or `blocked`).
/// `unknown` means Herdr sees no agent in the pane: there is no turn to
/// wait for. A status that cannot be read does not hold anything.
async fn mid_turn(shared: &Shared, a: &Admitted) -> bool {
    let req = Call::new(clankie_proto::admission::v1::RecheckRequest {
        ticket: a.ticket.clone(),
    })
    .timeout(INTERNAL)
    .request();
    match shared.admission.clone().seat_status(req).await {
        Ok(r) => matches!(r.into_inner().agent_status.as_str(), "working" | "blocked"),
        Err(_) => false,
    }
}

/// How often a held change looks at the turn again.
const HOLD_CHECK: Duration = Duration::from_secs(5);

/// Waits for a changed seat revision, but holds a change while the seat is
/// mid-turn: the bridge keeps its published catalog until the turn
/// settles. Returns `known` when nothing may be published within `wait`.
async fn settled_revision(shared: &Shared, a: &Admitted, known: &str, wait: Duration) -> String {
    // A bridge without a revision learns the current one at once.
    if known.is_empty() {
        return seat_revision(shared);
    }
    let deadline = tokio::time::Instant::now() + wait;
    let revision = revision_change(shared, known, wait).await;
    if revision == known {
        return revision;
    }
    loop {
        if !mid_turn(shared, a).await {
            return seat_revision(shared);
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return known.to_string();
        }
        tokio::time::sleep(HOLD_CHECK.min(deadline - now)).await;
    }
}

pub(crate) async fn mailbox(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    Query(q): Query<Wait>,
) -> Response {
    if let Err(e) = check_pane(&a, &pane) {
        return refusal(&e);
    }
    let wait = Duration::from_millis(q.wait.unwrap_or(0)).min(MAX_WAIT);
    let known = q.revision.unwrap_or_default();
    // The poll ends on a delivery or on a catalog change, whichever is first.
    let mut client = shared.mailbox.clone();
    let poll = client.seat_poll(request(
        &shared,
        &a,
        pb::SeatPollRequest {
            wait_ms: wait.as_millis() as u32,
            tools: q
                .tools
                .as_deref()
                .unwrap_or("")
                .split(',')
                .filter(|t| !t.is_empty())
                .take(64)
                .map(|t| t.chars().take(128).collect())
                .collect(),
        },
        wait,
    ));
    let changed = async {
        if known.is_empty() {
            std::future::pending::<String>().await
        } else {
            let revision = settled_revision(&shared, &a, &known, wait).await;
            if revision == known {
                // Held (or unchanged) to the end: let the poll answer.
                std::future::pending::<String>().await
            } else {
                revision
            }
        }
    };
    tokio::select! {
        polled = poll => match polled {
            Ok(r) => {
                let r = r.into_inner();
                // A change still held by a running turn is not published.
                let mut revision = seat_revision(&shared);
                if !known.is_empty() && revision != known && mid_turn(&shared, &a).await {
                    revision = known.clone();
                }
                axum::Json(json!({
                    "seatId": r.seat_id,
                    "catalogRevision": revision,
                    "deliveries": r.deliveries.iter().map(delivery_json).collect::<Vec<_>>(),
                }))
                .into_response()
            }
            Err(s) => failed(s),
        },
        revision = changed => axum::Json(json!({
            "catalogRevision": revision,
            "deliveries": [],
        }))
        .into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Ack {
    delivery_id: String,
    claim_id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Claim {
    delivery_ids: Vec<String>,
}

fn delivery_json(d: &pb::Delivery) -> Value {
    json!({
        "deliveryId": d.delivery_id,
        "kind": d.kind,
        "from": d.from,
        "text": d.text,
        "createdAtMs": d.created_at_ms,
        "peerMessageId": d.peer_message_id,
        "follows": d.follows,
    })
}

pub(crate) async fn claim(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    seat_post(&a, &pane, &body, |c: Claim| async {
        let msg = pb::SeatClaimRequest {
            delivery_ids: c.delivery_ids,
        };
        let mut mailbox = shared.mailbox.clone();
        let r = mailbox
            .seat_claim(request(&shared, &a, msg, Duration::ZERO))
            .await
            .map_err(grpc_err)?
            .into_inner();
        Ok(json!({
            "claimId": r.claim_id,
            "deliveries": r.deliveries.iter().map(delivery_json).collect::<Vec<_>>(),
        }))
    })
    .await
}

pub(crate) async fn release(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    seat_post(&a, &pane, &body, |r: Ack| async {
        let msg = pb::SeatReleaseRequest {
            delivery_id: r.delivery_id,
            claim_id: r.claim_id,
        };
        let mut mailbox = shared.mailbox.clone();
        let r = mailbox
            .seat_release(request(&shared, &a, msg, Duration::ZERO))
            .await
            .map_err(grpc_err)?;
        Ok(json!({ "released": r.into_inner().recorded }))
    })
    .await
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ClankieError> {
    serde_json::from_slice(body)
        .map_err(|e| ErrorCode::InvalidArgument.err(format!("malformed body: {e}")))
}

pub(crate) async fn ack(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    seat_post(&a, &pane, &body, |ack: Ack| async {
        let msg = pb::SeatAckRequest {
            delivery_id: ack.delivery_id,
            claim_id: ack.claim_id,
        };
        let mut mailbox = shared.mailbox.clone();
        let r = mailbox
            .seat_ack(request(&shared, &a, msg, Duration::ZERO))
            .await
            .map_err(grpc_err)?;
        Ok(json!({ "recorded": r.into_inner().recorded }))
    })
    .await
}

pub(crate) async fn tool_catalog(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    Query(q): Query<Wait>,
) -> Response {
    if let Err(e) = check_pane(&a, &pane) {
        return refusal(&e);
    }
    // Never reads or binds the mailbox.
    let wait = Duration::from_millis(q.wait.unwrap_or(0)).min(MAX_WAIT);
    let revision = settled_revision(&shared, &a, &q.revision.unwrap_or_default(), wait).await;
    axum::Json(json!({ "catalogRevision": revision })).into_response()
}

/// A seat as a sender needs it to address the seat: no process facts.
pub(crate) fn seat_json(s: &pb::Seat) -> Value {
    json!({
        "seatId": s.seat_id,
        "fleet": s.fleet,
        "paneId": s.pane_id,
        "linkId": s.link_id,
        "hireId": s.hire_id,
        "role": s.role,
        "projectId": s.project_id,
        "reachable": s.reachable,
    })
}

/// The caller's own seat, with the agent it is bound to: facts about its
/// own pane's processes, which it could read from `/proc` anyway.
fn own_seat_json(s: &pb::Seat) -> Value {
    let mut v = seat_json(s);
    v["binding"] = json!({
        "agentPid": s.agent_pid,
        "agentPidfsId": s.agent_pidfs_id.to_string(),
        "agentStartTime": s.agent_start_time.to_string(),
        "agentExecutable": s.agent_executable,
    });
    v
}

pub(crate) fn receipt_json(r: &pb::PeerReceipt) -> Value {
    let mut v = json!({
        "peerMessageId": r.peer_message_id,
        "receiptId": r.receipt_id,
        "senderSeat": r.sender_seat,
        "recipientSeat": r.recipient_seat,
        "state": r.state,
        "outcome": r.outcome,
        "createdAtMs": r.created_at_ms,
        "original": r.original,
    });
    if !r.text.is_empty() {
        v["text"] = json!(r.text);
    }
    if r.settled_at_ms != 0 {
        v["settledAtMs"] = json!(r.settled_at_ms);
    }
    if !r.follows.is_empty() {
        v["follows"] = json!(r.follows);
    }
    v
}

pub(crate) async fn list_peers(shared: &Shared, a: &Admitted) -> Result<Value, ClankieError> {
    let r = shared
        .mailbox
        .clone()
        .list_peers(request(shared, a, pb::ListPeersRequest {}, Duration::ZERO))
        .await
        .map_err(|s| ClankieError::from_status(&s))?
        .into_inner();
    Ok(json!({
        "self": r.self_.as_ref().map(own_seat_json),
        "seats": r.seats.iter().map(seat_json).collect::<Vec<_>>(),
    }))
}

pub(crate) async fn send_peer(
    shared: &Shared,
    a: &Admitted,
    seat: String,
    text: String,
    receipt_id: String,
) -> Result<Value, ClankieError> {
    clankie_types::fleet::ReceiptId::parse(&receipt_id)?;
    let sent = shared
        .mailbox
        .clone()
        .send_peer(request(
            shared,
            a,
            pb::SendPeerRequest {
                seat,
                text,
                receipt_id: receipt_id.clone(),
            },
            Duration::ZERO,
        ))
        .await;
    match sent {
        Ok(r) => Ok(receipt_json(&r.into_inner())),
        Err(s) if ClankieError::is_verdict(&s) => Err(ClankieError::from_status(&s)),
        // Forwarded, and no verdict came back: the message may be queued.
        Err(_) => Ok(clankie_types::fleet::outcome::lost_after_forward(
            &receipt_id,
        )),
    }
}

pub(crate) async fn peers(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
) -> Response {
    seat_route(&a, &pane, list_peers(&shared, &a)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Send {
    seat: String,
    text: String,
    receipt_id: String,
}

pub(crate) async fn peer_message(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path(pane): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    seat_post(&a, &pane, &body, |send: Send| {
        send_peer(&shared, &a, send.seat, send.text, send.receipt_id)
    })
    .await
}

pub(crate) async fn peer_receipt(
    State(shared): State<Arc<Shared>>,
    Extension(a): Extension<Admitted>,
    Path((pane, id)): Path<(String, String)>,
) -> Response {
    seat_route(&a, &pane, async {
        let msg = pb::GetPeerReceiptRequest {
            peer_message_id: id,
        };
        let mut mailbox = shared.mailbox.clone();
        let r = mailbox
            .get_peer_receipt(request(&shared, &a, msg, Duration::ZERO))
            .await
            .map_err(grpc_err)?;
        Ok(receipt_json(&r.into_inner()))
    })
    .await
}

pub(crate) mod review {
    use super::*;
    use base64::Engine as _;

    use clankie_types::views::candidate as candidate_view;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub(crate) struct Submit {
        checkout: String,
        head: String,
        base: String,
        patch_id: String,
        /// base64 of `git diff --binary BASE HEAD`.
        patch: String,
        summary: String,
        #[serde(default)]
        issue: String,
        #[serde(default)]
        evidence: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub(crate) struct FindingArg {
        text: String,
        #[serde(default)]
        file: String,
        #[serde(default)]
        line: u32,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub(crate) struct Verdict {
        pub(crate) candidate_id: String,
        pub(crate) patch_id: String,
        pub(crate) verdict: String,
        #[serde(default)]
        pub(crate) findings: Vec<FindingArg>,
        #[serde(default)]
        pub(crate) summary: String,
    }

    pub(crate) async fn read(
        shared: &Shared,
        a: &Admitted,
        candidate_id: String,
    ) -> Result<Value, ClankieError> {
        let msg = pb::GetReviewCandidateRequest { candidate_id };
        let c = shared
            .mailbox
            .clone()
            .get_review_candidate(request(shared, a, msg, Duration::ZERO))
            .await
            .map_err(grpc_err)?
            .into_inner();
        Ok(candidate_view(&c, true))
    }

    pub(crate) async fn decide(
        shared: &Shared,
        a: &Admitted,
        v: Verdict,
    ) -> Result<Value, ClankieError> {
        let msg = pb::ReviewVerdictRequest {
            candidate_id: v.candidate_id,
            patch_id: v.patch_id,
            verdict: v.verdict,
            findings: v
                .findings
                .into_iter()
                .map(|f| pb::Finding {
                    text: f.text,
                    file: f.file,
                    line: f.line,
                })
                .collect(),
            summary: v.summary,
        };
        let c = shared
            .mailbox
            .clone()
            .review_verdict(request(shared, a, msg, Duration::ZERO))
            .await
            .map_err(grpc_err)?
            .into_inner();
        Ok(candidate_view(&c, false))
    }

    pub(crate) async fn submit(
        State(shared): State<Arc<Shared>>,
        Extension(a): Extension<Admitted>,
        Path(pane): Path<String>,
        body: axum::body::Bytes,
    ) -> Response {
        let (shared, a) = (&shared, &a);
        seat_post(a, &pane, &body, |s: Submit| async move {
            let patch = base64::engine::general_purpose::STANDARD
                .decode(s.patch.as_bytes())
                .map_err(|_| ErrorCode::InvalidArgument.err("patch must be base64"))?;
            let msg = pb::SubmitReviewRequest {
                checkout: s.checkout,
                head: s.head,
                base: s.base,
                patch_id: s.patch_id,
                patch,
                summary: s.summary,
                issue: s.issue,
                evidence: s.evidence,
            };
            let mut mailbox = shared.mailbox.clone();
            let r = mailbox
                .submit_review(request(shared, a, msg, Duration::ZERO))
                .await
                .map_err(grpc_err)?;
            Ok(candidate_view(&r.into_inner(), false))
        })
        .await
    }

    pub(crate) async fn get(
        State(shared): State<Arc<Shared>>,
        Extension(a): Extension<Admitted>,
        Path((pane, id)): Path<(String, String)>,
    ) -> Response {
        seat_route(&a, &pane, read(&shared, &a, id)).await
    }

    pub(crate) async fn verdict(
        State(shared): State<Arc<Shared>>,
        Extension(a): Extension<Admitted>,
        Path(pane): Path<String>,
        body: axum::body::Bytes,
    ) -> Response {
        seat_post(&a, &pane, &body, |v: Verdict| decide(&shared, &a, v)).await
    }
}
