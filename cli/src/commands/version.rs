//! `clankie version`: this build, and the protocols it speaks.

use rmcp::model::ProtocolVersion;

/// The MCP versions the bridge answers, oldest first (a bridge carrying a
/// seat channel stops at 2025-11-25: channels need a session).
fn mcp_versions() -> Vec<String> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(ToString::to_string)
        .collect()
}

pub fn print(json: bool) {
    let version = env!("CARGO_PKG_VERSION");
    let mcp = mcp_versions();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "version": version,
                "mcpProtocolVersions": mcp,
                "grpc": "clankie.*.v1",
            })
        );
    } else {
        println!("clankie {version}");
        println!("MCP {}", mcp.join(", "));
        println!("services gRPC clankie.*.v1 over Unix sockets");
    }
}
