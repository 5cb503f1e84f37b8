//! `clankie-admission`: serves the admission service on its Unix socket.

use clankie_runtime::{grpc, paths::StatePaths, shutdown, telemetry};
use clap::Parser;

/// Serves fleet admission and fleet settings over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie).
    #[arg(long, env = "CLANKIE_STATE")]
    state: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init("admission");
    let args = Args::parse();
    let paths = args
        .state
        .map(StatePaths::new)
        .unwrap_or_else(StatePaths::from_env);
    let shutdown = shutdown::on_signals();
    let service = clankie_admission::Options::new(paths.clone()).build(shutdown.clone())?;
    grpc::serve_service(
        &paths,
        "admission",
        clankie_admission::HEALTH_NAME,
        service.routes(),
        service.readiness(),
        shutdown,
    )
    .await?;
    telemetry::shutdown();
    Ok(())
}
