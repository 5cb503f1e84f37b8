//! `clankie-gateway`: the HTTP and MCP front door.

use clankie_runtime::main_kit::CommonArgs;
use clankie_runtime::{Service, grpc, shutdown, telemetry, uds};
use clap::Parser;

/// Serves MCP over streamable HTTP for fleet members, plus /healthz and /readyz.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "CLANKIE_GATEWAY_ADDR", default_value = clankie_gateway::DEFAULT_ADDR)]
    listen: std::net::SocketAddr,
    /// Loopback address of the local TCP listener, for pane clients that
    /// cannot speak to a Unix socket (port 0 picks a free port).
    #[arg(
        long,
        env = "CLANKIE_GATEWAY_LOCAL_ADDR",
        default_value = "127.0.0.1:0"
    )]
    local_listen: std::net::SocketAddr,
    /// Extra Host names accepted besides loopback (for remote bearer links).
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Total budget of one request in milliseconds (at most 30000).
    #[arg(long, env = "CLANKIE_REQUEST_BUDGET_MS", default_value_t = 30_000)]
    request_budget_ms: u64,
    /// Most MCP sessions open at once on one listener.
    #[arg(long, env = "CLANKIE_MAX_SESSIONS", default_value_t = clankie_gateway::SessionCaps::default().total)]
    max_sessions: usize,
    /// Most MCP sessions one principal (a pane or a bearer link) may hold.
    #[arg(long, env = "CLANKIE_MAX_SESSIONS_PER_PRINCIPAL", default_value_t = clankie_gateway::SessionCaps::default().per_principal)]
    max_sessions_per_principal: usize,
    /// Milliseconds a connection has to send a complete request head.
    #[arg(long, env = "CLANKIE_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// Most connections one listener holds.
    #[arg(long, env = "CLANKIE_MAX_CONNECTIONS", default_value_t = clankie_gateway::ConnLimits::default().max_conns)]
    max_connections: usize,
    /// Most connections one listener holds that have not sent a request yet
    /// (past it, the oldest such connection is closed).
    #[arg(long, env = "CLANKIE_MAX_WAITING", default_value_t = clankie_gateway::ConnLimits::default().max_waiting)]
    max_waiting: usize,
    /// Most connections one peer holds: one address on a TCP listener, one
    /// process on the Unix socket.
    #[arg(long, env = "CLANKIE_MAX_CONNECTIONS_PER_PEER", default_value_t = clankie_gateway::ConnLimits::default().max_per_peer)]
    max_connections_per_peer: usize,
    /// Most connections one admitted member (pane, bearer link, grant)
    /// holds proven.
    #[arg(long, env = "CLANKIE_MAX_CONNECTIONS_PER_MEMBER", default_value_t = clankie_gateway::ConnLimits::default().max_per_member)]
    max_connections_per_member: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    clankie_runtime::state::private_umask();
    telemetry::init(Service::Gateway.name());
    let paths = args.common.paths();
    let shutdown = shutdown::on_signals();
    if !args.local_listen.ip().is_loopback() {
        anyhow::bail!("--local-listen must be a loopback address");
    }
    let tcp = tokio::net::TcpListener::bind(args.listen).await?;
    let local_tcp = tokio::net::TcpListener::bind(args.local_listen).await?;
    let socket = Service::Gateway.socket(&paths);
    let grpc_listener = uds::bind(&socket).await?;
    let _guard = uds::SocketGuard(socket);
    let local_socket = paths.local_mcp_socket();
    let local_listener = uds::bind(&local_socket).await?;
    let _local_guard = uds::SocketGuard(local_socket);
    let gateway = clankie_gateway::Options {
        paths: paths.clone(),
        allowed_hosts: args.allowed_hosts,
        request_budget: std::time::Duration::from_millis(args.request_budget_ms),
        session_caps: clankie_gateway::SessionCaps {
            total: args.max_sessions,
            per_principal: args.max_sessions_per_principal,
        },
    }
    .build(shutdown.clone());
    let limits = clankie_gateway::ConnLimits {
        header_timeout: std::time::Duration::from_millis(args.header_timeout_ms),
        max_conns: args.max_connections,
        max_waiting: args.max_waiting,
        max_per_peer: args.max_connections_per_peer,
        max_per_member: args.max_connections_per_member,
    };
    let addr = tcp.local_addr()?;
    let local_addr = local_tcp.local_addr()?;
    gateway.write_discovery(addr, local_addr)?;
    tracing::info!(%addr, local = %local_addr, "gateway serving");
    let guard = grpc::caller_guard(&paths, Service::Gateway)?;
    let health = tokio::spawn(grpc::serve(
        grpc_listener,
        guard,
        Service::Gateway.health_name(),
        None,
        clankie_runtime::readiness::Readiness::always(),
        shutdown.clone(),
    ));
    let local = {
        let gateway = gateway.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { gateway.serve_local(local_listener, limits, shutdown).await })
    };
    let local_tcp = {
        let gateway = gateway.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { gateway.serve_local_tcp(local_tcp, limits, shutdown).await })
    };
    gateway.serve(tcp, limits, shutdown.clone()).await?;
    let _ = local.await;
    let _ = local_tcp.await;
    let _ = std::fs::remove_file(paths.gateway_discovery());
    let _ = health.await;
    telemetry::shutdown();
    Ok(())
}
