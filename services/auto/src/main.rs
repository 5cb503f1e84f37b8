//! `clankie-auto`: the auto-scheduler, over gRPC on its Unix socket.

use std::time::Duration;

use clankie_runtime::Service;
use clankie_runtime::main_kit::{self, CommonArgs};
use clap::Parser;

/// Serves the auto-scheduler over gRPC on a Unix socket and runs its rounds.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
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
    let args = Args::parse();
    main_kit::run(Service::Auto, &args.common, |paths, shutdown| {
        let mut options = clankie_auto::Options::new(paths);
        options.tick = Duration::from_millis(args.tick.max(50));
        options.idle = Duration::from_millis(args.idle.unwrap_or(args.tick.max(50) * 4));
        options.build(shutdown)
    })
    .await
}
