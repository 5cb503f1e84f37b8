//! One shutdown path: a signal (or a parent's request) cancels a token that
//! every server and task watches.

use tokio_util::sync::CancellationToken;

/// Returns a token cancelled on the first SIGINT or SIGTERM, or, for a
/// service started by `clankie up` (`CLANKIE_PARENT_PID`), when that
/// supervisor is gone, so a killed supervisor never leaves services behind.
pub fn on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        t.cancel();
    });
    let parent = std::env::var("CLANKIE_PARENT_PID")
        .ok()
        .and_then(|p| p.parse::<i32>().ok());
    if let Some(parent) = parent {
        let t = token.clone();
        tokio::spawn(async move {
            loop {
                if nix::unistd::getppid().as_raw() != parent {
                    tracing::warn!("supervisor is gone; shutting down");
                    t.cancel();
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        });
    }
    token
}

/// Waits for SIGINT or SIGTERM.
pub async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
