//! One shutdown path: a signal (or a parent's request) cancels a token that
//! every server and task watches.

use tokio_util::sync::CancellationToken;

/// Returns a token cancelled on the first SIGINT or SIGTERM.
pub fn on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        t.cancel();
    });
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
