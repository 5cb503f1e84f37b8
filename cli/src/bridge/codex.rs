//! Deliveries into a Codex thread. Codex gives an MCP server no way to push
//! a message into its session, but its TUI runs on Codex's app-server: the
//! daemon whose control socket is `$CODEX_HOME/app-server-control/
//! app-server-control.sock` (WebSocket over a Unix socket, JSON-RPC with no
//! `jsonrpc` field). A client there rejoins the thread the TUI shows
//! (`thread/resume`) and starts a turn on it (`turn/start`); the TUI shows
//! the turn as its own. That is how a lead's or a peer's message reaches a
//! hired Codex.
//!
//! - The thread is the hire's: the most recently updated thread whose
//!   working folder is the bridge's own (Codex starts its MCP servers
//!   there), else the most recent.
//! - A thread mid-turn gets no new turn: the delivery waits for the next
//!   poll (nothing is steered into a running turn).
//! - A changed catalog reaches the thread through the same server
//!   ([`CodexThreads::refresh`]).
//! - Until Codex's app-server answers and the thread exists, nothing was
//!   handed off. Once `turn/start` was sent, only its answer says the turn
//!   started: a lost answer is uncertain, and the delivery is never sent
//!   twice.

use clankie_types::fleet::DeliveryKind;
use clankie_types::fleet::seat::Delivery;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::channel::Handoff;

/// The name the hire's registration gives the bridge.
const SERVER: &str = "clankie";

/// How long one exchange with the app-server may take.
const EXCHANGE: Duration = Duration::from_secs(10);

/// The app-server of the Codex whose MCP server this bridge is.
#[derive(Debug, Clone)]
pub(crate) struct CodexThreads {
    socket: PathBuf,
    cwd: PathBuf,
}

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::UnixStream>;

/// Why an exchange failed: before anything was asked of the thread, or
/// after.
enum Failed {
    Before(String),
    After(String),
}

struct Session {
    ws: Ws,
    next: u64,
}

impl Session {
    async fn open(socket: &Path) -> Result<Session, String> {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| format!("Codex's app-server is not reachable: {e}"))?;
        let (ws, _) = tokio_tungstenite::client_async("ws://localhost/", stream)
            .await
            .map_err(|e| format!("Codex's app-server refused the connection: {e}"))?;
        let mut s = Session { ws, next: 0 };
        s.call(
            "initialize",
            json!({
                "clientInfo": { "name": "clankie-fleet-bridge", "title": null, "version": env!("CARGO_PKG_VERSION") },
                "capabilities": { "experimentalApi": true },
            }),
        )
        .await?;
        s.ws.send(Message::text(
            json!({ "method": "initialized" }).to_string(),
        ))
        .await
        .map_err(|e| e.to_string())?;
        Ok(s)
    }

    /// One request; its result (notifications in between are skipped).
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next += 1;
        let id = self.next;
        let request = json!({ "id": id, "method": method, "params": params });
        let exchange = async {
            self.ws
                .send(Message::text(request.to_string()))
                .await
                .map_err(|e| e.to_string())?;
            while let Some(msg) = self.ws.next().await {
                let Message::Text(text) = msg.map_err(|e| e.to_string())? else {
                    continue;
                };
                let Ok(v) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if v["id"] != json!(id) {
                    continue;
                }
                if let Some(e) = v.get("error") {
                    return Err(format!(
                        "{method}: {}",
                        e["message"].as_str().unwrap_or("refused")
                    ));
                }
                return Ok(v["result"].clone());
            }
            Err("Codex's app-server closed the connection".to_string())
        };
        tokio::time::timeout(EXCHANGE, exchange)
            .await
            .map_err(|_| format!("{method}: no answer within {} s", EXCHANGE.as_secs()))?
    }
}

/// The hire's thread among those `thread/list` returned: the most recently
/// updated one working in `cwd`, else the most recent; never an ephemeral
/// one.
fn pick_thread(threads: &[Value], cwd: &Path) -> Option<String> {
    let usable = || threads.iter().filter(|t| t["ephemeral"] != json!(true));
    let newest = |it: &mut dyn Iterator<Item = &Value>| {
        it.max_by_key(|t| t["updatedAt"].as_i64().unwrap_or(0))
            .and_then(|t| t["id"].as_str())
            .map(str::to_string)
    };
    let here = |t: &&Value| {
        t["environments"].as_array().is_some_and(|es| {
            es.iter()
                .any(|e| e["cwd"].as_str().map(Path::new) == Some(cwd))
        })
    };
    newest(&mut usable().filter(here)).or_else(|| newest(&mut usable()))
}

/// The words a turn opens with: who the message is from, and that it is a
/// message to consider, not the owner typing.
pub(crate) fn framed(d: &Delivery) -> String {
    let source = match d.kind {
        DeliveryKind::Peer => "a peer seat",
        DeliveryKind::Wake => "a scheduled wake",
        DeliveryKind::Review => "the landing review",
        DeliveryKind::Lead => "your lead",
        DeliveryKind::Message => "a worker you hired (its own words, not the owner's)",
        DeliveryKind::Watch => "the fleet's watch on a hire",
    };
    format!(
        "[clankie: a message from {source} ({}), delivery {}]\n{}",
        d.from, d.delivery_id, d.text
    )
}

impl CodexThreads {
    /// The app-server of the Codex this bridge serves, when it is one:
    /// Codex passes `CODEX_HOME` to the bridge (its registration lists it).
    pub(crate) fn from_env() -> Option<CodexThreads> {
        let home = std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty())?;
        Some(CodexThreads {
            socket: PathBuf::from(home).join("app-server-control/app-server-control.sock"),
            cwd: std::env::current_dir().unwrap_or_default(),
        })
    }

    /// Starts a turn with the delivery on the hire's thread.
    pub(crate) async fn deliver(&self, d: &Delivery) -> Handoff {
        match self.start_turn(&framed(d)).await {
            Ok(()) => Handoff::Done,
            Err(Failed::Before(why)) => {
                tracing::debug!(%why, "no Codex thread took the delivery yet");
                Handoff::NotYet
            }
            Err(Failed::After(why)) => {
                tracing::warn!(%why, "a Codex turn may or may not have started");
                Handoff::Uncertain
            }
        }
    }

    /// Makes Codex take the bridge's new catalog. Codex logs
    /// `tools/list_changed` without refreshing what its model may call, and a
    /// plain `config/mcpServer/reload` keeps an unchanged connection; so the
    /// registration's environment gets the new revision (`config/batchWrite`
    /// into the hire's own config) and Codex reloads, reconnecting the
    /// bridge at the thread's next model step. At most three tries; no turn
    /// or tool call is ever repeated.
    pub(crate) async fn refresh(&self, revision: &str) {
        for attempt in 1..=3 {
            match self.reload(revision).await {
                Ok(()) => return,
                Err(why) if attempt == 3 => {
                    tracing::warn!(%why, "Codex did not take the new catalog");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500 * attempt)).await,
            }
        }
    }

    async fn reload(&self, revision: &str) -> Result<(), String> {
        let mut s = Session::open(&self.socket).await?;
        let edit = json!({
            "keyPath": format!("mcp_servers.{SERVER}.env.CLANKIE_CATALOG_REVISION"),
            "value": revision,
            "mergeStrategy": "upsert",
        });
        s.call(
            "config/batchWrite",
            json!({ "edits": [edit], "filePath": null, "expectedVersion": null, "reloadUserConfig": true }),
        )
        .await?;
        s.call("config/mcpServer/reload", json!({}))
            .await
            .map(|_| ())
    }

    async fn start_turn(&self, text: &str) -> Result<(), Failed> {
        let mut s = Session::open(&self.socket).await.map_err(Failed::Before)?;
        let listed = s
            .call("thread/list", json!({}))
            .await
            .map_err(Failed::Before)?;
        let threads = listed["data"].as_array().cloned().unwrap_or_default();
        let thread = pick_thread(&threads, &self.cwd)
            .ok_or_else(|| Failed::Before("Codex has no thread yet".into()))?;
        let resumed = s
            .call(
                "thread/resume",
                json!({ "threadId": thread, "excludeTurns": true }),
            )
            .await
            .map_err(Failed::Before)?;
        if resumed["thread"]["status"]["type"] == "active" {
            return Err(Failed::Before("the thread is mid-turn".into()));
        }
        let input = json!([{ "type": "text", "text": text, "text_elements": [] }]);
        s.call("turn/start", json!({ "threadId": thread, "input": input }))
            .await
            .map(|_| ())
            .map_err(Failed::After)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hires_thread_is_the_newest_in_its_folder() {
        let threads = vec![
            json!({"id": "other", "updatedAt": 9, "environments": [{"cwd": "/elsewhere"}]}),
            json!({"id": "old", "updatedAt": 1, "environments": [{"cwd": "/ws"}]}),
            json!({"id": "new", "updatedAt": 5, "environments": [{"cwd": "/ws"}]}),
            json!({"id": "gone", "updatedAt": 7, "ephemeral": true, "environments": [{"cwd": "/ws"}]}),
        ];
        assert_eq!(
            pick_thread(&threads, Path::new("/ws")).as_deref(),
            Some("new")
        );
        assert_eq!(
            pick_thread(&threads, Path::new("/nowhere")).as_deref(),
            Some("other")
        );
        assert_eq!(pick_thread(&[], Path::new("/ws")), None);
    }

    #[test]
    fn a_delivery_says_who_it_is_from() {
        let d: Delivery = serde_json::from_value(json!({
            "deliveryId": "dlv-1", "kind": "peer", "from": "seat-1", "text": "hello",
            "createdAtMs": 1, "peerMessageId": "pm-1", "follows": ""
        }))
        .expect("a delivery");
        assert_eq!(
            framed(&d),
            "[clankie: a message from a peer seat (seat-1), delivery dlv-1]\nhello"
        );
    }
}
