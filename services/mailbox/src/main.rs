//! `clankie-mailbox`: serves projects, conversations, hires and worker
//! reports over gRPC on its Unix socket.

use clankie_runtime::Service;
use clankie_runtime::main_kit;

fn main() -> anyhow::Result<()> {
    main_kit::main(
        Service::Mailbox,
        "Serves the mailbox over gRPC on a Unix socket.",
        |paths, shutdown| clankie_mailbox::Options::new(paths).build(shutdown),
    )
}
