//! Keeps a Herdr link's [`PaneMap`] current from Herdr's own events: one
//! more connection to its socket API, subscribed with `events.subscribe`
//! (subscriptions are named with dots, events arrive with underscores).
//!
//! A Herdr link is the whole server, so a pane moving between workspaces
//! or tabs does not change membership; what does is a pane closing or its
//! process going. What removes entries:
//! - `pane_closed`, `pane_exited`, `pane_updated`: that pane;
//! - `pane_moved`: the pane under its old id and its new one (a moved
//!   pane is given a new id);
//! - `tab_closed`, `workspace_closed`, and any event or line the watcher
//!   does not know: everything;
//! - the stream ending: everything, and the map stops answering until a
//!   new subscription has started.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::map::PaneMap;

/// The events subscribed to, as `events.subscribe` names them.
const SUBSCRIBED: [&str; 6] = [
    "pane.closed",
    "pane.exited",
    "pane.moved",
    "pane.updated",
    "tab.closed",
    "workspace.closed",
];

/// What one line from the subscribed connection means for the map.
#[derive(Debug, PartialEq, Eq)]
pub enum Notice {
    /// The subscription's own answer: it started.
    Started,
    /// The subscription was refused.
    Failed,
    /// These panes changed: forget them.
    Panes(Vec<String>),
    /// Anything else: forget everything.
    Unknown,
}

/// Classifies one line Herdr wrote to the subscribed connection. This faces
/// a process we do not control, so it is fuzzed (`fuzz_targets/pane_lines.rs`).
pub fn notice(line: &str, id: &str) -> Notice {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return Notice::Unknown;
    };
    if v["id"] == json!(id) {
        return match v["result"]["type"].as_str() {
            Some("subscription_started") => Notice::Started,
            _ => Notice::Failed,
        };
    }
    let data = &v["data"];
    let text = |p: &Value| p.as_str().map(str::to_string);
    let panes: Option<Vec<String>> = match v["event"].as_str() {
        Some("pane_closed" | "pane_exited") => text(&data["pane_id"]).map(|p| vec![p]),
        Some("pane_updated") => text(&data["pane"]["pane_id"]).map(|p| vec![p]),
        Some("pane_moved") => match (
            text(&data["previous_pane_id"]),
            text(&data["pane"]["pane_id"]),
        ) {
            (Some(old), Some(new)) => Some(vec![old, new]),
            _ => None,
        },
        _ => None,
    };
    panes.map_or(Notice::Unknown, Notice::Panes)
}

/// Keeps `map` current from the Herdr server at `socket` for as long as the
/// map is held elsewhere; subscribes again a second after a stream ends.
pub(super) fn spawn(socket: PathBuf, map: Weak<PaneMap>) {
    tokio::spawn(async move {
        loop {
            let Some(held) = map.upgrade() else { return };
            watch_once(&socket, &held).await;
            held.down();
            drop(held);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// One subscribed connection, until it ends.
async fn watch_once(socket: &std::path::Path, map: &Arc<PaneMap>) {
    let Ok(mut stream) = tokio::net::UnixStream::connect(socket).await else {
        return;
    };
    let id = format!("clankie_events_{}", std::process::id());
    let subscriptions: Vec<Value> = SUBSCRIBED.iter().map(|t| json!({ "type": t })).collect();
    let mut line = json!({
        "id": id,
        "method": "events.subscribe",
        "params": { "subscriptions": subscriptions },
    })
    .to_string();
    line.push('\n');
    if stream.write_all(line.as_bytes()).await.is_err() {
        return;
    }
    let Ok(probe) = stream.as_fd().try_clone_to_owned() else {
        return;
    };
    let mut probe = Some(probe);
    crate::events::read_lines(&stream, map, |line| match notice(line, &id) {
        Notice::Started => match probe.take() {
            Some(p) => {
                map.up(p);
                true
            }
            None => false,
        },
        Notice::Failed => false,
        Notice::Panes(panes) => {
            for p in &panes {
                map.forget_pane(p);
            }
            true
        }
        Notice::Unknown => {
            map.forget_everything();
            true
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_name_the_panes_they_change_and_junk_forgets_everything() {
        let id = "clankie_events_1";
        assert_eq!(
            notice(
                r#"{"id":"clankie_events_1","result":{"type":"subscription_started"}}"#,
                id
            ),
            Notice::Started
        );
        assert_eq!(
            notice(
                r#"{"id":"clankie_events_1","error":{"code":"x","message":"no"}}"#,
                id
            ),
            Notice::Failed
        );
        assert_eq!(
            notice(
                r#"{"event":"pane_closed","data":{"type":"pane_closed","pane_id":"w1:p2","workspace_id":"w1"}}"#,
                id
            ),
            Notice::Panes(vec!["w1:p2".into()])
        );
        assert_eq!(
            notice(
                r#"{"event":"pane_moved","data":{"previous_pane_id":"w1:p2","pane":{"pane_id":"w2:p1"}}}"#,
                id
            ),
            Notice::Panes(vec!["w1:p2".into(), "w2:p1".into()])
        );
        assert_eq!(
            notice(r#"{"event":"tab_closed","data":{}}"#, id),
            Notice::Unknown
        );
        assert_eq!(notice("not json", id), Notice::Unknown);
    }
}
