//! The gateway: the HTTP and MCP front door.
//!
//! Owns: the HTTP listeners (bearer TCP, the local Unix socket, loopback
//! TCP), the MCP streamable-HTTP endpoint (`/mcp`) serving the fleet tools,
//! the seat routes, the owner's operator routes and web console
//! (`/console`), `/metrics`, `/healthz` and `/readyz`, and the discovery
//! file bridges read.
//!
//! Does not own: any state, accounts, receipts or settings.
//!
//! Laid out in three layers, each depending only on the ones before it:
//!
//! - `doors/`: how a request is admitted (local proof, grant bearer, fleet
//!   bearer), with one shared ending; the admission ticket then rides on
//!   every gRPC call the request makes, with the request's remaining budget
//!   (30 s in total) as the gRPC deadline.
//! - `fleet/`: the operations a member can ask for, typed in and out, with
//!   no HTTP or MCP in them.
//! - `mcp/` and `http/`: the faces, which parse requests into operations and
//!   shape their answers.
//!
//! Beneath them: the connection loop and its bounds (`serve.rs`, `caps.rs`),
//! the request checks (`intake.rs`, `origin.rs`), MCP session ownership
//! (`sessions.rs`) and the streams followed from the services (`feeds.rs`).
//!
//! Remote machines: `relay/` is the main stack's TLS listener and each
//! machine's stream there; `uplink/` is a machine's own end of that
//! stream, which its panes' connected-tool requests cross.

mod activation;
mod caps;
mod console;
mod doors;
mod drain;
mod feeds;
mod fleet;
mod http;
mod intake;
mod listeners;
mod listing;
mod mcp;
mod observed;
mod origin;
mod refusal;
mod relay;
mod serve;
mod sessions;
mod uplink;

pub use activation::Passed;
pub use doors::Admitted;
pub use doors::local;
pub use listeners::{Addresses, Listening};
pub use refusal::refusal;
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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::grpc::{Client, Meta};
use clankie_runtime::paths::StatePaths;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
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
    pub(crate) admission: admission_pb::admission_client::AdmissionClient<Client>,
    pub(crate) mcp: mcphost_pb::mcp_host_client::McpHostClient<Client>,
    pub(crate) mailbox: clankie_proto::mailbox::v1::mailbox_client::MailboxClient<Client>,
    pub(crate) auto: clankie_proto::auto::v1::auto_client::AutoClient<Client>,
    /// The newest catalog info seen from mcp-host (revision 0: unknown).
    pub(crate) catalog: watch::Sender<mcphost_pb::CatalogInfo>,
    /// The newest fleet settings seen from admission.
    pub(crate) settings: watch::Sender<admission_pb::FleetSettings>,
    /// Counts coalesced tool-list announcements to sessions.
    pub(crate) announced: watch::Sender<u64>,
    pub(crate) peers: parking_lot::Mutex<Vec<rmcp::service::Peer<rmcp::RoleServer>>>,
    /// Every connected account's log lines, as mcp-host's feed gives them.
    pub(crate) log_lines: tokio::sync::broadcast::Sender<mcphost_pb::LogLine>,
    /// The grant calls being served, so a revoke answers them first.
    pub(crate) grant_calls: doors::grant::GrantCalls,
    pub(crate) request_budget: Duration,
    session_caps: sessions::SessionCaps,
    allowed_hosts: Vec<String>,
    /// The sessions of every listener, so a revoked grant's can be closed.
    pub(crate) listeners: parking_lot::Mutex<Vec<Arc<sessions::Sessions>>>,
    /// The stop's drain: calls answer before the sessions close.
    pub(crate) drain: drain::Drain,
    /// The owner credential's hash, for the gateway's own owner pages
    /// (`http/owner.rs`); none when it could not be read.
    pub(crate) owner: Option<clankie_runtime::owner::OwnerCheck>,
    /// The operator's console: its sign-ins and live feeds.
    pub(crate) console: console::Console,
    /// Each backend's health, asked over connections kept open.
    pub(crate) health: clankie_runtime::clients::Health,
    /// On a machine enrolled with a main stack: its link, which its panes'
    /// connected-tool requests cross (`relay/`).
    pub(crate) relay_out: Option<Arc<uplink::Outbox>>,
}

/// The gateway; cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) shared: Arc<Shared>,
}

impl Options {
    /// Builds the gateway and starts watching catalog and settings.
    pub fn build(self, shutdown: CancellationToken) -> Gateway {
        let admission = clankie_runtime::clients::admission(&self.paths, Meta::default());
        let mcp = clankie_runtime::clients::mcp_host(&self.paths, Meta::default());
        let mailbox = clankie_runtime::clients::mailbox(&self.paths, Meta::default());
        let auto = clankie_runtime::clients::auto(&self.paths, Meta::default());
        let health = clankie_runtime::clients::Health::new(&self.paths, Meta::default());
        let owner =
            clankie_runtime::owner::OwnerCheck::load(&self.paths.owner_credential())
                .inspect_err(|e| {
                    tracing::error!(error = %e, "owner credential unreadable; owner pages refuse everyone")
                })
                .ok();
        let (catalog, _) = watch::channel(mcphost_pb::CatalogInfo::default());
        let (settings, _) = watch::channel(admission_pb::FleetSettings::default());
        let relay_out = uplink::Outbox::load(&self.paths);
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
                drain: drain::Drain::after(shutdown.clone()),
                owner,
                console: console::Console::default(),
                health,
                relay_out,
            }),
        };
        tokio::spawn(feeds::watch_catalog(
            gateway.shared.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(feeds::watch_settings(
            gateway.shared.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(feeds::watch_logs(gateway.shared.clone(), shutdown.clone()));
        tokio::spawn(doors::grant::watch_revocations(
            gateway.shared.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(mcp::announce(gateway.shared.clone(), shutdown));
        crate::http::measure::watch_sessions(&gateway.shared);
        gateway
    }
}

impl Gateway {
    /// Writes `run/fleet/gateway.json` so bridges and the CLI find the gateway:
    /// the bearer listener, the local Unix socket and the local loopback
    /// TCP listener.
    pub fn write_discovery(
        &self,
        addr: SocketAddr,
        local_tcp: SocketAddr,
        relay: Option<clankie_types::discovery::RelayDiscovery>,
    ) -> std::io::Result<()> {
        let mut body = clankie_types::discovery::GatewayDiscovery::new(
            addr,
            self.shared.paths.local_mcp_socket(),
            local_tcp,
        );
        body.relay = relay;
        clankie_runtime::state::save_json(&self.shared.paths.gateway_discovery(), &body)
    }

    /// The axum router.
    pub fn router(&self, shutdown: CancellationToken) -> Router {
        let shared = self.shared.clone();
        // Host and Origin are checked once, in front of every route
        // (`origin.rs`), not again inside the MCP service.
        // The sessions close after the drain, not at the stop: calls still
        // running answer first (`drain.rs`).
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(self.shared.drain.closed.child_token())
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
            move || Ok(mcp::Bridge::new(factory_shared.clone())),
            manager,
            config,
        );
        use crate::http::seats;
        use axum::routing::{get, post};
        use clankie_types::fleet::seat::SeatRoute;
        let seat = |route: SeatRoute| route.template();
        Router::new()
            .nest_service("/mcp", mcp)
            .route(&seat(SeatRoute::Mailbox), get(seats::mailbox))
            .route(&seat(SeatRoute::Ack), post(seats::ack))
            .route(&seat(SeatRoute::Claim), post(seats::claim))
            .route(&seat(SeatRoute::Release), post(seats::release))
            .route(&seat(SeatRoute::ToolCatalog), get(seats::tool_catalog))
            .route(&seat(SeatRoute::Peers), get(seats::peers))
            .route(&seat(SeatRoute::PeerMessages), post(seats::peer_message))
            .route(&seat(SeatRoute::PeerMessage), get(seats::peer_receipt))
            .route(&seat(SeatRoute::Report), get(seats::report_receipt))
            .route(
                &seat(SeatRoute::ReviewCandidates),
                post(seats::submit_review),
            )
            .route(
                &seat(SeatRoute::ReviewCandidate),
                get(seats::review_candidate),
            )
            .route(
                &seat(SeatRoute::ReviewVerdicts),
                post(seats::review_verdict),
            )
            .layer(axum::middleware::from_fn_with_state(
                doors::AdmitState {
                    shared: shared.clone(),
                    sessions,
                },
                doors::admit,
            ))
            .route(
                "/v1/operator/projects",
                get(crate::http::operator::list_projects),
            )
            .route(
                "/v1/operator/projects/remove-workspace",
                post(crate::http::operator::remove_workspace),
            )
            .route(
                "/v1/tracker/request-budget",
                get(crate::http::operator::request_budget),
            )
            .route("/metrics", get(crate::http::metrics::metrics))
            .merge(console::routes())
            .route("/healthz", get(crate::http::health::healthz))
            .route("/readyz", get(crate::http::health::readyz))
            // After the doors: an unserved path is not found for anyone.
            .fallback(crate::http::edges::not_served)
            .with_state(shared)
            .layer(axum::middleware::from_fn(crate::http::edges::session_end))
            .layer(axum::middleware::from_fn(crate::http::edges::resume_after))
            .layer(axum::middleware::from_fn_with_state(hosts, origin::guard))
            .layer(axum::middleware::from_fn(crate::http::measure::record))
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
            serve::no_delay(listener),
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
            serve::no_delay(listener),
            router,
            limits,
            |io, addr: &SocketAddr| Some(local::LocalPeer::tcp(io, *addr)),
            |addr: &SocketAddr, _| Some(serve::PeerKey::Ip(addr.ip())),
            shutdown,
        )
        .await
    }
}
