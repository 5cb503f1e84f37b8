//! Compiles every `.proto` under `proto/` with protox (pure Rust, no protoc) and
//! writes the descriptor set that the services serve through reflection.

use std::path::PathBuf;

const FILES: &[&str] = &[
    "clankie/common/v1/common.proto",
    "clankie/admission/v1/admission.proto",
    "clankie/mcphost/v1/mcp_host.proto",
    "clankie/mailbox/v1/mailbox.proto",
    "clankie/helper/v1/helper.proto",
    "clankie/tracker/v1/tracker.proto",
    "clankie/auto/v1/auto.proto",
    "clankie/telemetry/v1/telemetry.proto",
    "clankie/relay/v1/relay.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(FILES, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let client = std::env::var_os("CARGO_FEATURE_CLIENT").is_some();
    let server = std::env::var_os("CARGO_FEATURE_SERVER").is_some();
    std::fs::write(
        out.join("clankie_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_client(client)
        .build_server(server)
        .compile_fds(fds)?;
    Ok(())
}
