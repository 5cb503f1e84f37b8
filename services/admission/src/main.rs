//! `clankie-admission`: serves the admission service on its Unix socket.

use clankie_runtime::Service;
use clankie_runtime::main_kit::{self, CommonArgs};
use clap::Parser;

/// Serves fleet admission and fleet settings over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    main_kit::run(Service::Admission, &args.common, |paths, shutdown| {
        clankie_admission::Options::new(paths).build(shutdown)
    })
    .await
}
