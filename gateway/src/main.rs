//! `clankie-gateway`: the HTTP and MCP front door.

use clankie_runtime::{grpc, paths::StatePaths, shutdown, telemetry, uds};
use clap::Parser;

/// Serves MCP over streamable HTTP for fleet members, plus /healthz and /readyz.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie).
    #[arg(long, env = "CLANKIE_STATE")]
    state: Option<std::path::PathBuf>,
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init("gateway");
    let args = Args::parse();
    let paths = args
        .state
        .map(StatePaths::new)
        .unwrap_or_else(StatePaths::from_env);
    let shutdown = shutdown::on_signals();
    if !args.local_listen.ip().is_loopback() {
        anyhow::bail!("--local-listen must be a loopback address");
    }
    let tcp = tokio::net::TcpListener::bind(args.listen).await?;
    let local_tcp = tokio::net::TcpListener::bind(args.local_listen).await?;
    let socket = paths.socket("gateway");
    let grpc_listener = uds::bind(&socket).await?;
    let _guard = uds::SocketGuard(socket);
    let local_socket = paths.local_mcp_socket();
    let local_listener = uds::bind(&local_socket).await?;
    let _local_guard = uds::SocketGuard(local_socket);
    let gateway = clankie_gateway::Options {
        paths: paths.clone(),
        allowed_hosts: args.allowed_hosts,
        request_budget: std::time::Duration::from_millis(args.request_budget_ms),
    }
    .build(shutdown.clone());
    let addr = tcp.local_addr()?;
    let local_addr = local_tcp.local_addr()?;
    gateway.write_discovery(addr, local_addr)?;
    tracing::info!(%addr, local = %local_addr, "gateway serving");
    let guard = grpc::caller_guard(&paths, "gateway")?;
    let health = tokio::spawn(grpc::serve(
        grpc_listener,
        guard,
        clankie_gateway::HEALTH_NAME,
        None,
        shutdown.clone(),
    ));
    let local = {
        let gateway = gateway.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { gateway.serve_local(local_listener, shutdown).await })
    };
    let local_tcp = {
        let gateway = gateway.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { gateway.serve_local_tcp(local_tcp, shutdown).await })
    };
    gateway.serve(tcp, shutdown.clone()).await?;
    let _ = local.await;
    let _ = local_tcp.await;
    let _ = std::fs::remove_file(paths.gateway_discovery());
    let _ = health.await;
    telemetry::shutdown();
    Ok(())
}
