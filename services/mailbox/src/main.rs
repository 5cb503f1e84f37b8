//! `clankie-mailbox`: serves projects, conversations, hires and worker
//! reports over gRPC on its Unix socket.

use clankie_runtime::{grpc, paths::StatePaths, shutdown, telemetry};
use clap::Parser;

/// Serves the mailbox over gRPC on a Unix socket.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie).
    #[arg(long, env = "CLANKIE_STATE")]
    state: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init("mailbox");
    let args = Args::parse();
    let paths = args
        .state
        .map(StatePaths::new)
        .unwrap_or_else(StatePaths::from_env);
    let shutdown = shutdown::on_signals();
    let mailbox = clankie_mailbox::MailboxService::open(paths.clone())?;
    grpc::serve_service(
        &paths,
        "mailbox",
        clankie_mailbox::HEALTH_NAME,
        mailbox.routes(),
        mailbox.readiness(),
        shutdown.clone(),
    )
    .await?;
    telemetry::shutdown();
    Ok(())
}
