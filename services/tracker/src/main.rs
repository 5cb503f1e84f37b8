//! `clankie-tracker`: serves the built-in tracker's store over gRPC on its
//! Unix socket.

use clankie_runtime::Service;
use clankie_runtime::main_kit::{self, CommonArgs};
use clap::Parser;

/// Serves the built-in tracker over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    main_kit::run(Service::Tracker, &args.common, |paths, shutdown| {
        clankie_tracker::service::Options::new(paths).build(shutdown)
    })
    .await
}
