//! Opening and closing hired panes in a linked Herdr workspace through its
//! socket API: the same acts as `tmux/act.rs`.

use std::path::Path;
use std::time::Duration;

use super::socket::{HerdrError, request};
use serde_json::{Value, json};

use crate::host::ActError;

const TIMEOUT: Duration = Duration::from_secs(5);

fn failed(e: HerdrError) -> ActError {
    ActError(match e {
        HerdrError::PaneNotFound => "herdr: pane not found".into(),
        HerdrError::Refused(code) => format!("herdr refused: {code}"),
        HerdrError::Unavailable(r) => format!("herdr: {r}"),
    })
}

async fn panes(socket: &Path, workspace: &str) -> Result<Vec<crate::Listed>, ActError> {
    let params = if workspace.is_empty() {
        json!({})
    } else {
        json!({ "workspace_id": workspace })
    };
    let listed = request(socket, "pane.list", params, TIMEOUT)
        .await
        .map_err(failed)?;
    Ok(listed["panes"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|x| {
                    Some(crate::Listed {
                        pane_id: x["pane_id"].as_str()?.to_string(),
                        agent_done: x["agent_status"] == "done",
                    })
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Splits a pane of the linked workspace, in `cwd` with `env`, and
/// starts `command` in the new pane's shell (replacing it).
pub async fn open(
    socket: &Path,
    workspace: &str,
    cwd: &str,
    env: &[(&str, String)],
    command: &[String],
) -> Result<String, ActError> {
    let target = panes(socket, workspace)
        .await?
        .into_iter()
        .next()
        .map(|p| p.pane_id)
        .ok_or_else(|| ActError("the linked Herdr workspace has no pane to split".into()))?;
    let env: serde_json::Map<String, Value> =
        env.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let split = request(
        socket,
        "pane.split",
        json!({
            "target_pane_id": target,
            "direction": "right",
            "cwd": cwd,
            "env": env,
            "focus": false,
        }),
        TIMEOUT,
    )
    .await
    .map_err(failed)?;
    let pane = split["pane"]["pane_id"]
        .as_str()
        .ok_or_else(|| ActError("Herdr did not name the new pane".into()))?
        .to_string();
    let line = format!("{}\n", clankie_runtime::sandbox::exec_line(command));
    request(
        socket,
        "pane.send_text",
        json!({ "pane_id": pane, "text": line }),
        TIMEOUT,
    )
    .await
    .map_err(failed)?;
    Ok(pane)
}

/// Closes a pane; a pane already gone is not an error.
pub async fn close(socket: &Path, pane: &str) -> Result<(), ActError> {
    match request(socket, "pane.close", json!({ "pane_id": pane }), TIMEOUT).await {
        Ok(_) | Err(HerdrError::PaneNotFound) => Ok(()),
        Err(e) => Err(failed(e)),
    }
}

/// Every live pane, with whether Herdr says its agent is done.
pub async fn live(socket: &Path) -> Result<Vec<crate::Listed>, ActError> {
    panes(socket, "").await
}
