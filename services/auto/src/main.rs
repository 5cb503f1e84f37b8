//! `clankie-auto`: the auto-scheduler, over gRPC on its Unix socket.

use std::time::Duration;

use clankie_runtime::{grpc, paths::StatePaths, shutdown, telemetry};
use clap::Parser;

/// Serves the auto-scheduler over gRPC on a Unix socket and runs its rounds.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie).
    #[arg(long, env = "CLANKIE_STATE")]
    state: Option<std::path::PathBuf>,
    /// The round interval in milliseconds (30 minutes; smaller in tests).
    #[arg(long, env = "CLANKIE_AUTO_TICK_MS", default_value_t = clankie_auto::ROUND_MS)]
    tick: u64,
    /// Unchanged evidence rewakes after this long (default: four rounds,
    /// two hours at the default tick).
    #[arg(long, env = "CLANKIE_AUTO_IDLE_MS")]
    idle: Option<u64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init("auto");
    let args = Args::parse();
    let paths = args
        .state
        .map(StatePaths::new)
        .unwrap_or_else(StatePaths::from_env);
    let shutdown = shutdown::on_signals();
    let tick = Duration::from_millis(args.tick.max(50));
    let idle = Duration::from_millis(args.idle.unwrap_or(args.tick.max(50) * 4));
    let auto = clankie_auto::AutoService::open(paths.clone(), tick, idle)?;
    let scheduler = tokio::spawn(auto.clone().run(shutdown.clone()));
    tracing::info!(tick_ms = tick.as_millis() as u64, "auto scheduling");
    grpc::serve_service(
        &paths,
        "auto",
        clankie_auto::HEALTH_NAME,
        auto.routes(),
        auto.readiness(),
        shutdown.clone(),
    )
    .await?;
    shutdown.cancel();
    let _ = scheduler.await;
    telemetry::shutdown();
    Ok(())
}
