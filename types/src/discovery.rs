//! `run/fleet/gateway.json`: where a running gateway listens.
//!
//! The gateway writes it once it has bound its listeners and removes it on
//! the way out; the CLI's bridge and `status`, the scenario tests and the
//! Python harness read it. One struct, so the writer and every reader agree
//! on the names (the file's keys are camelCase).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayDiscovery {
    /// The bearer listener's base URL (`http://ADDR`): remote streams and
    /// fleet bearers come in here.
    pub url: String,
    /// The bearer listener's MCP endpoint (`{url}/mcp`).
    pub mcp: String,
    /// The local Unix socket that pane processes reach, admitted by their
    /// kernel facts.
    pub unix: PathBuf,
    /// The loopback TCP MCP endpoint, admitted by its peer's kernel facts.
    pub local_mcp: String,
    /// The gateway process, so `clankie up` can tell a stale file from a
    /// live gateway.
    pub pid: u32,
    /// The relay listener, when this stack takes remote machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelayDiscovery>,
}

/// `run/fleet/uplink.json`: where an enrolled machine's link to its main
/// stack stands, as its gateway last saw it (written on each change).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UplinkStatus {
    /// `up`, `down` (it was up and dropped; retrying), `refused` (it did
    /// not come up; retrying) or `unreadable` (this stack's link or key
    /// file cannot be read; not trying).
    pub state: String,
    /// When it entered this state (unix ms).
    pub since_ms: i64,
    /// Why, for any state but `up`: a reason code (`machine_not_found`,
    /// `relay_certificate_mismatch`, `service_unavailable`) or what the
    /// link saw (`silent`, `closed`, `timed out`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The main stack's relay address.
    pub main: String,
    /// The gateway that wrote it.
    pub pid: u32,
}

/// Where remote machines reach this stack, and the certificate they pin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelayDiscovery {
    /// `HOST:PORT` of the TLS listener.
    pub addr: String,
    /// The SHA-256 (hex) of the listener's certificate.
    pub cert_sha256: String,
}

impl GatewayDiscovery {
    /// The discovery record of a gateway whose bearer listener is at
    /// `addr`, whose local socket is `unix` and whose loopback listener is
    /// at `local_tcp`.
    pub fn new(
        addr: impl std::fmt::Display,
        unix: PathBuf,
        local_tcp: impl std::fmt::Display,
    ) -> Self {
        Self {
            url: format!("http://{addr}"),
            mcp: format!("http://{addr}/mcp"),
            unix,
            local_mcp: format!("http://{local_tcp}/mcp"),
            pid: std::process::id(),
            relay: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file written before the struct existed (by `json!`) still loads,
    /// and the struct writes the same keys back.
    #[test]
    fn the_file_written_by_hand_before_still_loads() {
        let old = r#"{"localMcp":"http://127.0.0.1:4000/mcp","mcp":"http://127.0.0.1:7755/mcp","pid":42,"unix":"/s/run/fleet/local.sock","url":"http://127.0.0.1:7755"}"#;
        let d: GatewayDiscovery = serde_json::from_str(old).expect("loads");
        assert_eq!(d.unix, PathBuf::from("/s/run/fleet/local.sock"));
        assert_eq!(d.local_mcp, "http://127.0.0.1:4000/mcp");
        let back: serde_json::Value = serde_json::to_value(&d).expect("writes");
        let old: serde_json::Value = serde_json::from_str(old).expect("parses");
        assert_eq!(back, old);
    }

    #[test]
    fn new_builds_the_endpoints_from_the_addresses() {
        let d = GatewayDiscovery::new("127.0.0.1:1", "/u".into(), "127.0.0.1:2");
        assert_eq!(d.url, "http://127.0.0.1:1");
        assert_eq!(d.mcp, "http://127.0.0.1:1/mcp");
        assert_eq!(d.local_mcp, "http://127.0.0.1:2/mcp");
    }
}
