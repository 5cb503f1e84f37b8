//! Finding the running gateway from its discovery file.
//!
//! A hire is told where the file is (`CLANKIE_GATEWAY_DISCOVERY`), never
//! where the state folder is, and `CLANKIE_MCP_SOCKET` names its local
//! socket outright; the owner's commands read `run/fleet/gateway.json`.

use std::path::PathBuf;

use anyhow::Context;
use clankie_runtime::paths::StatePaths;
pub use clankie_types::discovery::GatewayDiscovery;

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// The discovery record of the running gateway.
pub fn read(paths: &StatePaths) -> anyhow::Result<GatewayDiscovery> {
    let file = env("CLANKIE_GATEWAY_DISCOVERY")
        .map(PathBuf::from)
        .unwrap_or_else(|| paths.gateway_discovery());
    let bytes = std::fs::read(&file).with_context(|| {
        format!(
            "no gateway discovery file at {}; pass --url or set CLANKIE_FLEET_URL",
            file.display()
        )
    })?;
    serde_json::from_slice(&bytes).context("the gateway discovery file is unreadable")
}

/// The gateway's local Unix socket: `CLANKIE_MCP_SOCKET`, else the one the
/// discovery file names.
pub fn local_socket(paths: &StatePaths) -> anyhow::Result<String> {
    match env("CLANKIE_MCP_SOCKET") {
        Some(socket) => Ok(socket),
        None => Ok(read(paths)?.unix.to_string_lossy().into_owned()),
    }
}
