//! `clankie-admission`: serves the admission service on its Unix socket.

use clankie_runtime::Service;
use clankie_runtime::main_kit;

fn main() -> anyhow::Result<()> {
    main_kit::main(
        Service::Admission,
        "Serves fleet admission and fleet settings over gRPC on a Unix socket.",
        |paths, shutdown| clankie_admission::Options::new(paths).build(shutdown),
    )
}
