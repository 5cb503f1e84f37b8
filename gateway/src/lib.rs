//! The gateway: the HTTP and MCP front door.
//!
//! Owns: the HTTP listener, the MCP streamable-HTTP endpoint (`/mcp`) that
//! serves the two-tool bridge to fleet members, `/healthz` and `/readyz`, and
//! the discovery file bridges read. Every request to `/mcp` is admitted by one
//! gRPC call to the admission service before anything else happens; the
//! admission ticket then rides on every gRPC call the request makes, with the
//! request's remaining budget (30 s in total) as the gRPC deadline.
//!
//! Does not own: any state, accounts, receipts or settings.

mod bridge;
mod caps;
mod grants;
mod intake;
pub mod local;
mod operator;
mod origin;
mod seats;
mod serve;
mod sessions;

pub use serve::{ConnLimits, PeerKey};

/// Entry points for the fuzz targets (`fuzz/`): the intake's pure parsers.
#[doc(hidden)]
pub mod fuzzing {
    /// The JSON-RPC request ids a `/mcp` body holds, or its refusal.
    pub fn request_ids(bytes: &[u8]) -> Result<Vec<String>, (i64, String)> {
        crate::intake::request_ids(bytes)
    }
}
pub use sessions::SessionCaps;

use clankie_runtime::clients::{Call, INTERNAL};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clankie_proto::admission::v1 as apb;
use clankie_proto::common::v1::{FleetTools, Principal};
use clankie_proto::mcphost::v1 as mpb;
use clankie_runtime::grpc::{Client, Meta};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::{ClankieError, ErrorCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The default listen address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7755";
/// The total budget of one request.
pub const REQUEST_BUDGET: Duration = Duration::from_secs(30);
/// Largest request body accepted on `/mcp`.
pub const MAX_BODY: usize = 4 << 20;
/// Idle MCP sessions expire after this long; clients reconnect.
pub const SESSION_IDLE: Duration = Duration::from_secs(15 * 60);

/// What admission proved for one HTTP request.
#[derive(Clone, Debug)]
pub struct Admitted {
    pub ticket: String,
    pub principal: Principal,
    pub tools_on: bool,
    /// A manual grant's bearer: the session reaches that grant's tools
    /// and nothing else.
    pub grant: Option<String>,
}

/// Gateway options.
pub struct Options {
    pub paths: StatePaths,
    pub allowed_hosts: Vec<String>,
    /// The total budget of one request (default 30 s).
    pub request_budget: Duration,
    /// How many MCP sessions may be open, in all and per principal.
    pub session_caps: SessionCaps,
}

/// Shared state behind every handler.
pub(crate) struct Shared {
    pub(crate) paths: StatePaths,
    pub(crate) admission: apb::admission_client::AdmissionClient<Client>,
    pub(crate) mcp: mpb::mcp_host_client::McpHostClient<Client>,
    pub(crate) mailbox: clankie_proto::mailbox::v1::mailbox_client::MailboxClient<Client>,
    pub(crate) auto: clankie_proto::auto::v1::auto_client::AutoClient<Client>,
    /// The newest catalog info seen from mcp-host (revision 0: unknown).
    pub(crate) catalog: watch::Sender<mpb::CatalogInfo>,
    /// The newest fleet settings seen from admission.
    pub(crate) settings: watch::Sender<apb::FleetSettings>,
    /// Counts coalesced tool-list announcements to sessions.
    pub(crate) announced: watch::Sender<u64>,
    pub(crate) peers: parking_lot::Mutex<Vec<rmcp::service::Peer<rmcp::RoleServer>>>,
    /// Every connected account's log lines, as mcp-host's feed gives them.
    pub(crate) log_lines: tokio::sync::broadcast::Sender<mpb::LogLine>,
    /// The grant calls being served, so a revoke answers them first.
    pub(crate) grant_calls: grants::GrantCalls,
    pub(crate) request_budget: Duration,
    session_caps: sessions::SessionCaps,
    allowed_hosts: Vec<String>,
    /// The sessions of every listener, so a revoked grant's can be closed.
    pub(crate) listeners: parking_lot::Mutex<Vec<Arc<sessions::Sessions>>>,
}

/// The gateway; cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    shared: Arc<Shared>,
}

impl Options {
    /// Builds the gateway and starts watching catalog and settings.
    pub fn build(self, shutdown: CancellationToken) -> Gateway {
        let admission = clankie_runtime::clients::admission(&self.paths, Meta::default());
        let mcp = clankie_runtime::clients::mcp_host(&self.paths, Meta::default());
        let mailbox = clankie_runtime::clients::mailbox(&self.paths, Meta::default());
        let auto = clankie_runtime::clients::auto(&self.paths, Meta::default());
        let (catalog, _) = watch::channel(mpb::CatalogInfo::default());
        let (settings, _) = watch::channel(apb::FleetSettings::default());
        let gateway = Gateway {
            shared: Arc::new(Shared {
                paths: self.paths,
                admission,
                mcp,
                mailbox,
                auto,
                catalog,
                settings,
                announced: watch::channel(0).0,
                peers: parking_lot::Mutex::new(Vec::new()),
                log_lines: tokio::sync::broadcast::channel(256).0,
                grant_calls: Default::default(),
                request_budget: self.request_budget.min(REQUEST_BUDGET),
                session_caps: self.session_caps,
                allowed_hosts: self.allowed_hosts,
                listeners: Default::default(),
            }),
        };
        tokio::spawn(bridge::watch_catalog(
            gateway.shared.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(bridge::watch_settings(
            gateway.shared.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(bridge::watch_logs(gateway.shared.clone(), shutdown.clone()));
        tokio::spawn(grants::watch_revocations(
            gateway.shared.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(bridge::announce(gateway.shared.clone(), shutdown));
        gateway
    }
}

impl Gateway {
    /// Writes `run/fleet/gateway.json` so bridges and the CLI find the gateway:
    /// the bearer listener, the local Unix socket and the local loopback
    /// TCP listener.
    pub fn write_discovery(&self, addr: SocketAddr, local_tcp: SocketAddr) -> std::io::Result<()> {
        let body = clankie_types::discovery::GatewayDiscovery::new(
            addr,
            self.shared.paths.local_mcp_socket(),
            local_tcp,
        );
        clankie_runtime::state::save_json(&self.shared.paths.gateway_discovery(), &body)
    }

    /// The axum router.
    pub fn router(&self, shutdown: CancellationToken) -> Router {
        let shared = self.shared.clone();
        // Host and Origin are checked once, in front of every route
        // (`origin.rs`), not again inside the MCP service.
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(shutdown.child_token())
            .with_max_request_body_bytes(MAX_BODY)
            .disable_allowed_hosts()
            .disable_allowed_origins();
        let hosts = Arc::new(origin::Hosts::new(&self.shared.allowed_hosts));
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(SESSION_IDLE);
        let manager = Arc::new(manager);
        let sessions = sessions::Sessions::new(manager.clone(), self.shared.session_caps);
        self.shared.listeners.lock().push(sessions.clone());
        tokio::spawn(sessions.clone().prune(shutdown.clone()));
        let factory_shared = shared.clone();
        let mcp = StreamableHttpService::new(
            move || Ok(bridge::Bridge::new(factory_shared.clone())),
            manager,
            config,
        );
        use axum::routing::{get, post};
        Router::new()
            .nest_service("/mcp", mcp)
            .route("/v1/fleet/seats/{pane}/mailbox", get(seats::mailbox))
            .route("/v1/fleet/seats/{pane}/mailbox/ack", post(seats::ack))
            .route("/v1/fleet/seats/{pane}/mailbox/claim", post(seats::claim))
            .route(
                "/v1/fleet/seats/{pane}/mailbox/release",
                post(seats::release),
            )
            .route(
                "/v1/fleet/seats/{pane}/tool-catalog",
                get(seats::tool_catalog),
            )
            .route("/v1/fleet/seats/{pane}/peers", get(seats::peers))
            .route(
                "/v1/fleet/seats/{pane}/peer-messages",
                post(seats::peer_message),
            )
            .route(
                "/v1/fleet/seats/{pane}/peer-messages/{id}",
                get(seats::peer_receipt),
            )
            .route(
                "/v1/fleet/seats/{pane}/review-candidates",
                post(seats::review::submit),
            )
            .route(
                "/v1/fleet/seats/{pane}/review-candidates/{id}",
                get(seats::review::get),
            )
            .route(
                "/v1/fleet/seats/{pane}/review-verdicts",
                post(seats::review::verdict),
            )
            .layer(axum::middleware::from_fn_with_state(
                AdmitState {
                    shared: shared.clone(),
                    sessions,
                },
                admit,
            ))
            .route(
                "/v1/operator/projects",
                axum::routing::get(operator::list_projects),
            )
            .route(
                "/v1/operator/projects/remove-workspace",
                axum::routing::post(operator::remove_workspace),
            )
            .route(
                "/v1/tracker/request-budget",
                axum::routing::get(operator::request_budget),
            )
            .route("/healthz", axum::routing::get(healthz))
            .route("/readyz", axum::routing::get(readyz))
            .with_state(shared)
            .layer(axum::middleware::from_fn_with_state(hosts, origin::guard))
    }

    /// Serves HTTP on `listener` until `shutdown` (bearer clients).
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        limits: ConnLimits,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        let router = self.router(shutdown.clone());
        serve::serve(
            listener,
            router,
            limits,
            |_, _| None::<()>,
            |addr: &SocketAddr, _| Some(serve::PeerKey::Ip(addr.ip())),
            shutdown,
        )
        .await
    }

    /// Serves HTTP on the local Unix socket until `shutdown`. Each
    /// connection's peer is named by the kernel and proven once; later
    /// requests on it reuse the proof after a cheap recheck.
    pub async fn serve_local(
        &self,
        listener: tokio::net::UnixListener,
        limits: ConnLimits,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        let router = self.router(shutdown.clone());
        serve::serve(
            local::CredListener::new(listener)?,
            router,
            limits,
            |io, _| Some(local::LocalPeer::unix(io)),
            |_, peer: Option<&local::LocalPeer>| peer.map(local::LocalPeer::key),
            shutdown,
        )
        .await
    }

    /// Serves HTTP on the local loopback TCP listener until `shutdown`, for
    /// clients that cannot speak to a Unix socket: each connection's owner
    /// is found by sock_diag and a descriptor census, then proven once.
    pub async fn serve_local_tcp(
        &self,
        listener: tokio::net::TcpListener,
        limits: ConnLimits,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        let router = self.router(shutdown.clone());
        serve::serve(
            listener,
            router,
            limits,
            |io, addr: &SocketAddr| Some(local::LocalPeer::tcp(io, *addr)),
            |addr: &SocketAddr, _| Some(serve::PeerKey::Ip(addr.ip())),
            shutdown,
        )
        .await
    }
}

/// The JSON body of a refusal: `{"error": {"code", "message", "retryable"}}`.
pub fn refusal(e: &ClankieError) -> Response {
    let mut resp = (e.code.http(), axum::Json(json!({ "error": e.body() }))).into_response();
    if e.code == ErrorCode::RequestBudget
        && let Some(ms) = e.details_json().and_then(|d| d["retryAfterMs"].as_u64())
        && let Ok(v) = http::HeaderValue::from_str(&ms.div_ceil(1000).max(1).to_string())
    {
        resp.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    if e.code == ErrorCode::FleetAdmissionUnavailable {
        resp.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    if e.code.http() == http::StatusCode::UNAUTHORIZED
        && let Ok(v) = http::HeaderValue::from_str(&format!("Bearer error=\"{}\"", e.code.as_str()))
    {
        resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// What the admission middleware holds: the shared clients and the
/// sessions of this listener with their owners.
#[derive(Clone)]
struct AdmitState {
    shared: Arc<Shared>,
    sessions: Arc<sessions::Sessions>,
}

/// Admits every `/mcp` request before it reaches the MCP service.
async fn admit(State(state): State<AdmitState>, req: Request, next: Next) -> Response {
    use tracing::Instrument as _;
    let span = tracing::info_span!("gateway.request", method = %req.method(), otel.kind = "server");
    clankie_runtime::telemetry::adopt_http_parent(&span, req.headers());
    admit_inner(state, req, next).instrument(span).await
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

async fn admit_inner(state: AdmitState, mut req: Request, next: Next) -> Response {
    let AdmitState { shared, sessions } = state;
    if let Err(e) = intake::check_head(&req) {
        return refusal(&e);
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
    let bearer = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    let local_peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<local::LocalPeer>>()
        .map(|c| c.0.clone());
    if bearer.is_empty()
        && let Some(peer) = local_peer
    {
        return match local::admit(&shared, &peer).await {
            Ok(admitted) => {
                req.extensions_mut().insert(admitted);
                let (req, ids) = match intake::checked_body(req).await {
                    Ok(checked) => checked,
                    Err(resp) => return resp,
                };
                // The whole body is read: all of it must be the member's.
                if let Err(e) = local::check_writers(&shared, &peer).await {
                    return refusal(&e);
                }
                run_admitted(&sessions, req, ids, next).await
            }
            Err(e) => refusal(&e),
        };
    }
    if bearer.starts_with(grants::BEARER_PREFIX) {
        return match grants::admit(&shared, &bearer).await {
            Ok(admitted) => {
                req.extensions_mut().insert(admitted);
                let (req, ids) = match intake::checked_body(req).await {
                    Ok(checked) => checked,
                    Err(resp) => return resp,
                };
                run_admitted(&sessions, req, ids, next).await
            }
            Err(e) => refusal(&e),
        };
    }
    if bearer.is_empty() {
        let e = ErrorCode::FleetCredentialRequired
            .err("a fleet bearer token is required; ask the lead for a fleet link");
        tracing::info!(reason = e.code.as_str(), "fleet.admission.refused");
        return refusal(&e);
    }
    let call = Call::new(apb::AdmitRequest { bearer })
        .timeout(INTERNAL)
        .request();
    let admitted = shared.admission.clone().admit(call).await;
    match admitted {
        Ok(resp) => {
            let resp = resp.into_inner();
            let tools_on = resp
                .settings
                .as_ref()
                .is_some_and(|s| s.tools == FleetTools::Connected as i32);
            req.extensions_mut().insert(Admitted {
                ticket: resp.ticket,
                principal: resp.principal.unwrap_or_default(),
                tools_on,
                grant: None,
            });
            let (req, ids) = match intake::checked_body(req).await {
                Ok(checked) => checked,
                Err(resp) => return resp,
            };
            run_admitted(&sessions, req, ids, next).await
        }
        Err(status) => {
            let mut e = ClankieError::from_status(&status);
            if matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
            ) && !status
                .metadata()
                .contains_key(clankie_runtime::code::REASON_KEY)
            {
                e = ErrorCode::FleetAdmissionUnavailable
                    .err("fleet admission is unavailable right now; nothing was forwarded, retry shortly");
            }
            refusal(&e)
        }
    }
}

async fn healthz() -> impl IntoResponse {
    axum::Json(json!({ "status": "ok" }))
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    let mut services = serde_json::Map::new();
    let mut ready = true;
    for service in clankie_runtime::Service::BACKENDS {
        // Readiness: serving, and its state readable.
        let state =
            clankie_runtime::clients::service_state(&shared.paths, service, Meta::default()).await;
        ready &= state == clankie_runtime::clients::ServiceState::Serving;
        // The wire word for a service that does not answer is `not_serving`.
        let word = match state {
            clankie_runtime::clients::ServiceState::Down => "not_serving",
            other => other.as_str(),
        };
        services.insert(service.name().into(), json!(word));
    }
    let status = if ready {
        http::StatusCode::OK
    } else {
        http::StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        axum::Json(json!({ "ready": ready, "services": services })),
    )
        .into_response()
}
