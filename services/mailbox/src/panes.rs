//! Opening and closing hired panes in a linked tmux session.
//!
//! Reads of pane membership stay with admission (its persistent control
//! client); the mailbox only acts: one `tmux` command per hire or close.

use std::process::Stdio;

/// Why tmux could not act.
#[derive(Debug)]
pub struct TmuxError(pub String);

async fn tmux(socket: &str, args: &[String]) -> Result<String, TmuxError> {
    let out = tokio::process::Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| TmuxError(format!("tmux could not start: {e}")))?;
    if !out.status.success() {
        return Err(TmuxError(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The session a hire opens in: the pinned one, or the server's first.
pub async fn session(socket: &str, pinned: &str) -> Result<String, TmuxError> {
    if !pinned.is_empty() {
        return Ok(pinned.to_string());
    }
    let all = tmux(
        socket,
        &[
            "list-sessions".into(),
            "-F".into(),
            "#{session_name}".into(),
        ],
    )
    .await?;
    all.lines()
        .next()
        .map(str::to_string)
        .ok_or_else(|| TmuxError("the linked tmux server has no session".into()))
}

/// Opens a window running `command` in `cwd`, with `env` set, and returns
/// its pane id. The command goes to the pane's shell as one line with
/// every word quoted and `exec` in front, as on Herdr: a one-word command
/// is never interpreted by the shell, and the shell does not outlive it.
pub async fn open(
    socket: &str,
    session: &str,
    cwd: &str,
    env: &[(&str, String)],
    command: &[String],
) -> Result<String, TmuxError> {
    let mut args: Vec<String> = vec![
        "new-window".into(),
        "-d".into(),
        "-P".into(),
        "-F".into(),
        "#{pane_id}".into(),
        "-t".into(),
        format!("={session}:"),
        "-c".into(),
        cwd.into(),
    ];
    for (k, v) in env {
        args.push("-e".into());
        args.push(format!("{k}={v}"));
    }
    args.push(clankie_runtime::sandbox::exec_line(command));
    let pane = tmux(socket, &args).await?;
    if !pane.starts_with('%') {
        return Err(TmuxError("tmux did not name the new pane".into()));
    }
    Ok(pane)
}

/// Closes a pane; a pane already gone is not an error.
pub async fn close(socket: &str, pane: &str) -> Result<(), TmuxError> {
    match tmux(socket, &["kill-pane".into(), "-t".into(), pane.into()]).await {
        Ok(_) => Ok(()),
        Err(e) if e.0.contains("can't find pane") => Ok(()),
        Err(e) => Err(e),
    }
}

/// Every live pane id of the server.
pub async fn live(socket: &str) -> Result<Vec<String>, TmuxError> {
    let out = tmux(
        socket,
        &[
            "list-panes".into(),
            "-a".into(),
            "-F".into(),
            "#{pane_id}".into(),
        ],
    )
    .await?;
    Ok(out.lines().map(str::to_string).collect())
}

/// Herdr: the same three acts through its socket API.
pub mod herdr {
    use std::path::Path;
    use std::time::Duration;

    use clankie_runtime::herdr::{HerdrError, request};
    use serde_json::{Value, json};

    use super::TmuxError;

    const TIMEOUT: Duration = Duration::from_secs(5);

    fn failed(e: HerdrError) -> TmuxError {
        TmuxError(match e {
            HerdrError::PaneNotFound => "herdr: pane not found".into(),
            HerdrError::Refused(code) => format!("herdr refused: {code}"),
            HerdrError::Unavailable(r) => format!("herdr: {r}"),
        })
    }

    async fn pane_ids(socket: &Path, workspace: &str) -> Result<Vec<String>, TmuxError> {
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
                    .filter_map(|x| x["pane_id"].as_str().map(str::to_string))
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
    ) -> Result<String, TmuxError> {
        let target = pane_ids(socket, workspace)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| TmuxError("the linked Herdr workspace has no pane to split".into()))?;
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
            .ok_or_else(|| TmuxError("Herdr did not name the new pane".into()))?
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
    pub async fn close(socket: &Path, pane: &str) -> Result<(), TmuxError> {
        match request(socket, "pane.close", json!({ "pane_id": pane }), TIMEOUT).await {
            Ok(_) | Err(HerdrError::PaneNotFound) => Ok(()),
            Err(e) => Err(failed(e)),
        }
    }

    /// Every live pane id.
    pub async fn live(socket: &Path) -> Result<Vec<String>, TmuxError> {
        pane_ids(socket, "").await
    }
}
