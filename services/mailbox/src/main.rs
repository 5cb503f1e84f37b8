//! `clankie-mailbox`: serves projects, conversations, hires and worker
//! reports over gRPC on its Unix socket.

use clankie_runtime::Service;
use clankie_runtime::main_kit::{self, CommonArgs};
use clap::Parser;

/// Serves the mailbox over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    main_kit::run(Service::Mailbox, &args.common, |paths, shutdown| {
        clankie_mailbox::Options::new(paths).build(shutdown)
    })
    .await
}
