//! What the harness's MCP era means to the bridge. A harness may speak
//! 2025-06-18 or 2025-11-25 (a handshake, then a session), or 2026-07-28
//! (stateless: every request carries its protocol version, client info and
//! capabilities in `_meta`, and every result names its `resultType`). The
//! bridge's own session with the gateway is negotiated apart, so nothing of
//! the harness's session crosses into it, and what comes back is shaped for
//! the harness's era (rmcp drops `resultType` again for older peers).

use rmcp::model::{CallToolResult, RequestMetaObject, ResultType};
use serde_json::{Map, Value};

/// The prefix of the protocol's own `_meta` keys.
const PROTOCOL: &str = "io.modelcontextprotocol/";
/// The one protocol key that asks for something of this request alone.
const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// The harness request's `_meta` less the keys that describe the harness's
/// own session (`protocolVersion`, `clientInfo`, `clientCapabilities`):
/// copied into the bridge's session they contradict what it negotiated,
/// and the gateway refuses the request (`-32020`). The progress token, the
/// per-request log level and every key that is not the protocol's travel.
pub(crate) fn forwardable(meta: &RequestMetaObject) -> RequestMetaObject {
    let kept: Map<String, Value> = meta
        .0
        .0
        .iter()
        .filter(|(k, _)| !k.starts_with(PROTOCOL) || k.as_str() == LOG_LEVEL)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    kept.into()
}

/// A result read from the gateway's (older) session carries no
/// `resultType`; a 2026-07-28 harness requires it.
pub(crate) fn complete(mut result: CallToolResult) -> CallToolResult {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_harness_sessions_own_keys_stay_behind() {
        let meta: Map<String, Value> = serde_json::from_value(json!({
            "progressToken": 7,
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "claude-code"},
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/logLevel": "debug",
            "claudecode/toolUseId": "toolu_1",
        }))
        .expect("meta");
        let kept = forwardable(&meta.into());
        let mut keys: Vec<&String> = kept.0.0.keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "claudecode/toolUseId",
                "io.modelcontextprotocol/logLevel",
                "progressToken"
            ]
        );
    }
}
