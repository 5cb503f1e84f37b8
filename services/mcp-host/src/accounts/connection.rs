//! One connection to an upstream: the client handler that hears its
//! notifications, opening it (initialize, then list), and listing its tools.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{ClientConfig, ProtocolVersion};
use rmcp::service::{NotificationContext, Peer, RoleClient};
use rmcp::{ClientHandler, ServiceExt};
use tokio::sync::Notify;

use super::error_text;
use super::stderr::StderrTail;
use super::*;

/// The MCP client side of one account: it hears `tools/list_changed`.
/// Progress and log lines go to the relay from the transport's tap, in the
/// order the upstream sent them.
pub(super) struct Upstream {
    pub(super) relist: Arc<Notify>,
}

impl ClientHandler for Upstream {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info.client_info.name = "clankie-mcp-host".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relist.notify_one();
    }
}

/// Asks an upstream that logs for every level: each reader filters at its
/// own (a fleet session's, a grant call's).
#[allow(deprecated, reason = "MCP logging is still what upstreams send")]
pub(super) async fn hear_every_level(peer: &Peer<RoleClient>) {
    let logs = peer
        .peer_info()
        .is_some_and(|i| i.capabilities.logging.is_some());
    if logs {
        let ask = rmcp::model::SetLevelRequestParams::new(rmcp::model::LoggingLevel::Debug);
        let _ = tokio::time::timeout(CONNECT_TIMEOUT, peer.set_level(ask)).await;
    }
}

pub(super) type Running = rmcp::service::RunningService<RoleClient, Upstream>;

/// Opens one connection. A stdio server's stderr goes to `stderr_log` and
/// `tail`.
pub(super) async fn open_connection(
    config: &AccountConfig,
    handler: Upstream,
    tap: clankie_runtime::mcp_tap::Observer,
    tail: &mut StderrTail,
    stderr_log: PathBuf,
) -> Result<Running, String> {
    use clankie_runtime::mcp_tap::Tap;
    use rmcp::transport::IntoTransport;
    match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env).kill_on_drop(true);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("could not start {command}: {e}"))?;
            if let Some(stderr) = stderr {
                tail.attach(stderr, stderr_log);
            }
            let transport = IntoTransport::<RoleClient, _, _>::into_transport(transport);
            handler
                .serve(Tap::new(transport, tap))
                .await
                .map_err(|e| error_text::plain(&format!("initialize failed: {e}")))
        }
        Transport::Http { url, headers } => {
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let mut custom = HashMap::new();
            for (k, v) in headers {
                if k.eq_ignore_ascii_case("authorization") {
                    let token = v.strip_prefix("Bearer ").unwrap_or(v);
                    cfg = cfg.auth_header(token.to_string());
                } else if let (Ok(k), Ok(v)) = (
                    http::HeaderName::from_bytes(k.as_bytes()),
                    http::HeaderValue::from_str(v),
                ) {
                    custom.insert(k, v);
                }
            }
            // Each request carries its call's trace context as headers.
            use clankie_runtime::telemetry::{TraceHeaders, mcp_http_client};
            let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                TraceHeaders(mcp_http_client()),
                cfg.custom_headers(custom),
            );
            handler.serve(Tap::new(transport, tap)).await.map_err(|e| {
                let text = error_text::plain(&format!("initialize failed: {e}"));
                let hint = error_text::url_hint(url.as_str(), &text).unwrap_or_default();
                text + &hint
            })
        }
    }
}

pub(super) async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, String> {
    tokio::time::timeout(CONNECT_TIMEOUT, peer.list_all_tools())
        .await
        .map_err(|_| "tools/list timed out".to_string())?
        .map_err(|e| error_text::plain(&format!("tools/list failed: {e}")))
}
