//! `clankie-mcp-host`: serves connected accounts, the catalog and connected
//! calls over gRPC on its Unix socket.

use clankie_runtime::Service;
use clankie_runtime::main_kit::{self, CommonArgs};
use clap::Parser;

/// Serves the mcp-host over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Settled receipt bodies kept before retention trims older ones.
    #[arg(long, env = "CLANKIE_RECEIPT_BODIES", default_value_t = clankie_mcp_host::DEFAULT_RETAINED_BODIES)]
    retained_bodies: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    main_kit::run(Service::McpHost, &args.common, |paths, shutdown| {
        let mut options = clankie_mcp_host::Options::new(paths);
        options.retained_bodies = args.retained_bodies;
        options.build(shutdown)
    })
    .await
}
