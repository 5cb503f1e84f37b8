//! The doors: how a request on `/mcp` and the seat routes is admitted
//! before anything else runs. Three doors, one ending:
//!
//! - `local`: a connection on the local socket (or loopback TCP) whose peer
//!   the kernel names, proven once by admission and rechecked after;
//! - `grant`: a manual grant's bearer, authenticated by mcp-host;
//! - `bearer`: a fleet link's bearer, admitted by admission.
//!
//! Whichever door admits, the request then goes the same way ([`enter`]):
//! the [`Admitted`] proof rides in its extensions, the body is read and
//! checked, and it runs inside the MCP session it names only when that
//! session is this member's.

pub(crate) mod bearer;
pub(crate) mod grant;
pub mod local;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::common::v1::{AdmissionMode, FleetTools, Principal};
use clankie_runtime::{ClankieError, ErrorCode};

use crate::intake::refuse_unread;
use crate::refusal::refusal;
use crate::{Shared, intake, serve, sessions};

/// What a door proved for one HTTP request.
#[derive(Clone, Debug)]
pub struct Admitted {
    pub ticket: String,
    pub principal: Principal,
    pub tools_on: bool,
    /// A manual grant's bearer: the session reaches that grant's tools
    /// and nothing else.
    pub grant: Option<String>,
}

impl Admitted {
    /// What admission's answer proves: its ticket, its principal, and
    /// whether connected tools are on.
    pub(crate) fn from_admission(resp: admission_pb::AdmitResponse) -> Admitted {
        Admitted {
            tools_on: tools_on(resp.settings.as_ref()),
            ticket: resp.ticket,
            principal: resp.principal.unwrap_or_default(),
            grant: None,
        }
    }

    /// Whether this member holds a native seat: a proven pane.
    pub(crate) fn is_seat(&self) -> bool {
        self.principal.mode == AdmissionMode::Local as i32 && !self.principal.pane_id.is_empty()
    }
}

/// Whether fleet settings have connected tools on.
pub(crate) fn tools_on(settings: Option<&admission_pb::FleetSettings>) -> bool {
    settings.is_some_and(|s| s.tools == FleetTools::Connected as i32)
}

/// Admission's refusal as a door reports it: admission's own verdict, or,
/// when it gave none (down, reset, too slow), `unavailable` saying why.
pub(crate) fn admission_refusal(status: &tonic::Status, unavailable: &str) -> ClankieError {
    if ClankieError::is_verdict(status) {
        #[allow(
            clippy::disallowed_methods,
            reason = "a door decodes admission's verdict once, here"
        )]
        return ClankieError::from_status(status);
    }
    // Admission logged its own verdicts; that it did not answer is known
    // only here.
    let e = ErrorCode::FleetAdmissionUnavailable.err(unavailable);
    tracing::warn!(reason = e.code.as_str(), "fleet.admission.refused");
    e
}

/// What the admission middleware holds: the shared clients and the
/// sessions of this listener with their owners.
#[derive(Clone)]
pub(crate) struct AdmitState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) sessions: Arc<sessions::Sessions>,
}

/// Admits every request on the member routes before it reaches them.
pub(crate) async fn admit(State(state): State<AdmitState>, req: Request, next: Next) -> Response {
    use tracing::Instrument as _;
    let span = tracing::info_span!("gateway.request", method = %req.method(), otel.kind = "server");
    clankie_runtime::telemetry::adopt_http_parent(&span, req.headers());
    admit_inner(state, req, next).instrument(span).await
}

/// The door a request knocks on.
enum Door {
    Local(local::LocalPeer),
    Grant(String),
    Bearer(String),
    None,
}

impl Door {
    /// A request with a bearer is a bearer's; without one, a local
    /// connection's; else it has no credential.
    fn of(req: &Request) -> Door {
        let bearer = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        let local = req
            .extensions()
            .get::<axum::extract::ConnectInfo<local::LocalPeer>>()
            .map(|c| c.0.clone());
        match (bearer, local) {
            (b, Some(peer)) if b.is_empty() => Door::Local(peer),
            (b, _) if b.is_empty() => Door::None,
            (b, _) if b.starts_with(grant::BEARER_PREFIX) => Door::Grant(b),
            (b, _) => Door::Bearer(b),
        }
    }
}

async fn admit_inner(state: AdmitState, req: Request, next: Next) -> Response {
    let AdmitState { shared, sessions } = state;
    if let Err(e) = intake::check_head(&req) {
        return refuse_unread(req, &e).await;
    }
    let limit = intake::body_limit(req.uri().path());
    let too_big = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > limit);
    if too_big {
        return refusal(&intake::too_large(limit));
    }
    let door = Door::of(&req);
    let admitted = match &door {
        Door::Local(peer) => local::admit(&shared, peer).await,
        Door::Grant(bearer) => grant::admit(&shared, bearer)
            .await
            .map(local::Knock::Proven),
        Door::Bearer(bearer) => bearer::admit(&shared, bearer)
            .await
            .map(local::Knock::Proven),
        Door::None => {
            let e = ErrorCode::FleetCredentialRequired
                .err("a fleet bearer token is required; ask the lead for a fleet link");
            tracing::info!(reason = e.code.as_str(), "fleet.admission.refused");
            Err(e)
        }
    };
    match admitted {
        Ok(knock) => enter(&shared, &sessions, req, knock, &door, next).await,
        Err(e) => refuse_unread(req, &e).await,
    }
}

/// The one ending of every door: its body is read and checked (on a local
/// connection, every byte of it must be the member's, and a held proof is
/// settled for it), the proof goes with the request, and it runs in its
/// session.
async fn enter(
    shared: &Shared,
    sessions: &sessions::Sessions,
    req: Request,
    knock: local::Knock,
    door: &Door,
    next: Next,
) -> Response {
    let (mut req, ids, by_mailbox) = match intake::checked_body(req).await {
        Ok(checked) => checked,
        Err(resp) => return resp,
    };
    let admitted = match (door, knock) {
        (Door::Local(peer), knock) => {
            if let Err(e) = local::check_writers(shared, peer).await {
                return refusal(&e);
            }
            match knock {
                local::Knock::Proven(a) => a,
                local::Knock::Held(a) => match local::confirm(shared, peer, a, by_mailbox).await {
                    Ok(a) => a,
                    Err(e) => return refusal(&e),
                },
            }
        }
        (_, local::Knock::Proven(a)) => a,
        (_, local::Knock::Held(_)) => {
            return refusal(&ErrorCode::Internal.err("only a local door holds a proof"));
        }
    };
    req.extensions_mut().insert(admitted);
    run_admitted(sessions, req, ids, next).await
}

/// Runs an admitted request, inside the session it names only when that
/// session is the caller's.
async fn run_admitted(
    sessions: &sessions::Sessions,
    req: Request,
    ids: Vec<String>,
    next: Next,
) -> Response {
    let owner = req
        .extensions()
        .get::<Admitted>()
        .map(|a| sessions::owner_key(&a.principal))
        .unwrap_or_default();
    // An admitted member's connection is never displaced by a newcomer, up
    // to its share of the listener.
    if let Some(conn) = req.extensions().get::<serve::ConnHandle>()
        && !conn.0.prove(&owner)
    {
        return refusal(
            &ErrorCode::TooManyConnections.err(
                "this member holds its most connections to the gateway; close one, or reuse it",
            ),
        );
    }
    if let Err(e) = sessions.check(req.headers(), &owner) {
        return refusal(&e);
    }
    let deleting = req.method() == http::Method::DELETE;
    let named = sessions::named(req.headers());
    let on_mcp = req.uri().path().starts_with("/mcp");
    if on_mcp
        && named.is_none()
        && req.method() == http::Method::POST
        && let Err(e) = sessions.check_room(&owner).await
    {
        return refusal(&e);
    }
    let held = match &named {
        Some(session) if !ids.is_empty() => match sessions.claim(session, &ids) {
            Ok(held) => Some(held),
            Err(e) => {
                let id = serde_json::from_str(&ids[0]).unwrap_or(serde_json::Value::Null);
                return intake::jsonrpc_refusal(&e, id);
            }
        },
        _ => None,
    };
    let resp = intake::jsonrpc_errors(next.run(req).await).await;
    sessions.settle(deleting, named.as_deref(), &resp, &owner);
    match held {
        Some(held) => intake::hold_until_sent(resp, held),
        None => resp,
    }
}
