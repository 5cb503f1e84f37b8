//! Opening and closing hired panes in a linked tmux session: one `tmux`
//! command per act. Reads of pane membership go through the control client
//! (`tmux/mod.rs`) instead.

use std::process::Stdio;

use crate::host::ActError;

async fn tmux(socket: &str, args: &[String]) -> Result<String, ActError> {
    let out = tokio::process::Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| ActError(format!("tmux could not start: {e}")))?;
    if !out.status.success() {
        return Err(ActError(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The session a hire opens in: the pinned one, or the server's first.
pub async fn session(socket: &str, pinned: &str) -> Result<String, ActError> {
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
        .ok_or_else(|| ActError("the linked tmux server has no session".into()))
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
) -> Result<String, ActError> {
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
        return Err(ActError("tmux did not name the new pane".into()));
    }
    Ok(pane)
}

/// Closes a pane; a pane already gone is not an error.
pub async fn close(socket: &str, pane: &str) -> Result<(), ActError> {
    match tmux(socket, &["kill-pane".into(), "-t".into(), pane.into()]).await {
        Ok(_) => Ok(()),
        Err(e) if e.0.contains("can't find pane") => Ok(()),
        Err(e) => Err(e),
    }
}

/// Every live pane of the server.
pub async fn live(socket: &str) -> Result<Vec<crate::Listed>, ActError> {
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
    Ok(out
        .lines()
        .map(|id| crate::Listed {
            pane_id: id.to_string(),
            agent_done: false,
        })
        .collect())
}
