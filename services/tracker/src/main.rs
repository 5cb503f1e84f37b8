//! `clankie-tracker`: serves the built-in tracker's store over gRPC on its
//! Unix socket.

use clankie_runtime::owner::OwnerCheck;
use clankie_runtime::{grpc, paths::StatePaths, shutdown, telemetry};
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
    grpc::serve_service(
        &paths,
        "tracker",
        clankie_tracker::service::HEALTH_NAME,
        service.routes(),
        service.readiness(),
        shutdown.clone(),
    )
    .await?;
    telemetry::shutdown();
    Ok(())
}
