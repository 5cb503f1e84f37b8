//! `clankie-tracker`: serves the built-in tracker's store over gRPC on its
//! Unix socket.

use clankie_runtime::owner::OwnerCheck;
use clankie_runtime::{grpc, paths::StatePaths, shutdown, telemetry, uds};
use clap::Parser;

/// Serves the built-in tracker over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie).
    #[arg(long, env = "CLANKIE_STATE")]
    state: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init("tracker");
    let args = Args::parse();
    let paths = args
        .state
        .map(StatePaths::new)
        .unwrap_or_else(StatePaths::from_env);
    let shutdown = shutdown::on_signals();
    let owner = OwnerCheck::load(&paths.owner_credential())?;
    let service =
        clankie_tracker::service::TrackerService::open(&paths.service_dir("tracker"), owner);
    let socket = paths.socket("tracker");
    let listener = uds::bind(&socket).await?;
    let _guard = uds::SocketGuard(socket);
    tracing::info!("tracker serving");
    grpc::serve(
        listener,
        clankie_tracker::service::HEALTH_NAME,
        Some(service.routes()),
        shutdown.clone(),
    )
    .await?;
    telemetry::shutdown();
    Ok(())
}
