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
/// its pane id.
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
    args.extend(command.iter().cloned());
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
