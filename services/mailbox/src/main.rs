//! `clankie-mailbox`: serves projects, conversations, hires and worker
//! reports over gRPC on its Unix socket, and watches hires for completions.

use std::time::Duration;

use clankie_runtime::Service;
use clankie_runtime::main_kit::{self, CommonArgs};
use clap::Parser;

/// Serves the mailbox over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// How often open hires are observed for completions, in milliseconds.
    #[arg(long, env = "CLANKIE_HARVEST_MS", default_value_t = clankie_mailbox::HARVEST_EVERY.as_millis() as u64)]
    harvest: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    main_kit::run(Service::Mailbox, &args.common, |paths, shutdown| {
        let mut options = clankie_mailbox::Options::new(paths);
        options.harvest_every = Duration::from_millis(args.harvest.max(50));
        options.build(shutdown)
    })
    .await
}
