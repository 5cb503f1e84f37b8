//! `clankie-tracker`: serves the built-in tracker's store over gRPC on its
//! Unix socket.

use clankie_runtime::Service;
use clankie_runtime::main_kit;

fn main() -> anyhow::Result<()> {
    main_kit::main(
        Service::Tracker,
        "Serves the built-in tracker over gRPC on a Unix socket.",
        |paths, shutdown| clankie_tracker::service::Options::new(paths).build(shutdown),
    )
}
