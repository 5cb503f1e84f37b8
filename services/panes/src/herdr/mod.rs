//! Herdr as a pane host, over its newline-delimited JSON socket API
//! (`socket`): reads with `pane.get`, `pane.process_info` (`shell_pid`) and
//! `pane_not_found`, and the acts a hire needs (`act`). Everything goes
//! straight to the socket, never through a Herdr CLI process.

mod act;
pub mod socket;
mod watch;

use std::path::PathBuf;

pub use act::{close, live, open};
use serde_json::{Value, json};
use socket::{HerdrError, request};
pub use watch::{Notice, notice};

use crate::host::{Pane, PaneError, PaneHost, READ_TIMEOUT};
use crate::map::PaneMap;

/// A Herdr server's socket API.
#[derive(Debug, Clone)]
pub struct Herdr {
    pub socket: PathBuf,
    /// The server's pane map, kept by a subscribed connection started at
    /// the first use (`watch`).
    map: std::sync::Arc<PaneMap>,
    watching: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Herdr {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Herdr {
            socket: socket.into(),
            map: Default::default(),
            watching: Default::default(),
        }
    }

    /// The server's pane map, its watcher started on first use.
    pub fn map(&self) -> &PaneMap {
        use std::sync::atomic::Ordering;
        // Checked before it is swapped: most calls find it set, and a read
        // costs no write to the shared line.
        if !self.watching.load(Ordering::Relaxed) && !self.watching.swap(true, Ordering::SeqCst) {
            match tokio::runtime::Handle::try_current() {
                Ok(_) => watch::spawn(self.socket.clone(), std::sync::Arc::downgrade(&self.map)),
                Err(_) => self.watching.store(false, Ordering::SeqCst),
            }
        }
        &self.map
    }

    /// The socket path in Herdr's own search order.
    pub fn discover() -> Option<PathBuf> {
        clankie_runtime::paths::herdr_socket()
    }

    /// Sends one request and reads its response line.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, PaneError> {
        request(&self.socket, method, params, READ_TIMEOUT)
            .await
            .map_err(|e| match e {
                HerdrError::PaneNotFound => PaneError::NotFound,
                HerdrError::Refused(_) => PaneError::Unavailable("herdr_error"),
                HerdrError::Unavailable(r) => PaneError::Unavailable(r),
            })
    }
}

/// A pane from Herdr's `pane.process_info` answer.
pub fn herdr_pane(pane_id: &str, session: String, proc: &Value) -> Result<Pane, PaneError> {
    let p = &proc["process_info"];
    let shell_pid = p["shell_pid"]
        .as_i64()
        .and_then(|v| i32::try_from(v).ok())
        .filter(|pid| *pid > 0)
        .ok_or(PaneError::Unavailable("herdr_malformed"))?;
    let command = p["foreground_processes"][0]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    Ok(Pane {
        pane_id: pane_id.to_string(),
        window: session.clone(),
        session,
        shell_pid,
        command,
    })
}

impl PaneHost for Herdr {
    async fn pane(&self, pane_id: &str) -> Result<Pane, PaneError> {
        let info = self
            .request("pane.get", json!({ "pane_id": pane_id }))
            .await?;
        let session = info["pane"]["workspace_id"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let proc = self
            .request("pane.process_info", json!({ "pane_id": pane_id }))
            .await?;
        herdr_pane(pane_id, session, &proc)
    }

    async fn panes(&self) -> Result<Vec<Pane>, PaneError> {
        let list = self.request("pane.list", json!({})).await?;
        let ids: Vec<String> = list["panes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| p["pane_id"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.pane(&id).await {
                Ok(p) => out.push(p),
                Err(PaneError::NotFound) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}
