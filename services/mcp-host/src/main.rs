//! `clankie-mcp-host`: serves connected accounts, the catalog and connected
//! calls over gRPC on its Unix socket.

use clankie_runtime::{grpc, paths::StatePaths, shutdown, telemetry};
use clap::Parser;

/// Serves the mcp-host over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie).
    #[arg(long, env = "CLANKIE_STATE")]
    state: Option<std::path::PathBuf>,
    /// Settled receipt bodies kept before retention trims older ones.
    #[arg(long, env = "CLANKIE_RECEIPT_BODIES", default_value_t = clankie_mcp_host::DEFAULT_RETAINED_BODIES)]
    retained_bodies: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    telemetry::init("mcp-host");
    let args = Args::parse();
    let paths = args
        .state
        .map(StatePaths::new)
        .unwrap_or_else(StatePaths::from_env);
    let shutdown = shutdown::on_signals();
    let mut options = clankie_mcp_host::Options::new(paths.clone());
    options.retained_bodies = args.retained_bodies;
    let host = options.build(shutdown.clone()).await?;
    grpc::serve_service(
        &paths,
        "mcp-host",
        clankie_mcp_host::HEALTH_NAME,
        host.routes(),
        host.readiness(),
        shutdown.clone(),
    )
    .await?;
    host.close().await;
    telemetry::shutdown();
    Ok(())
}
