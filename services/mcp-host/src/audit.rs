//! The provider-call audit: one JSON line per dispatch and per settlement,
//! naming the principal (`fleet:ID:pane:PANE`, or `pane:unverified` for
//! bearer links). Arguments and results are never written here.

use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

/// One audit line.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event<'a> {
    pub event: &'static str,
    pub principal: &'a str,
    pub account: &'a str,
    pub tool: &'a str,
    pub receipt_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// Appends to `audit/connected-calls.jsonl`.
#[derive(Clone)]
pub struct Audit {
    file: Arc<Mutex<File>>,
}

impl Audit {
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        clankie_runtime::state::private_dir(dir)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(dir.join("connected-calls.jsonl"))?;
        Ok(Audit {
            file: Arc::new(Mutex::new(file)),
        })
    }

    /// Appends one event (a single write, so lines never interleave).
    pub fn record(&self, event: &Event<'_>) {
        #[derive(Serialize)]
        struct Line<'a> {
            ts: i64,
            #[serde(flatten)]
            event: &'a Event<'a>,
        }
        let Ok(mut line) = serde_json::to_vec(&Line {
            ts: clankie_runtime::now_ms(),
            event,
        }) else {
            return;
        };
        line.push(b'\n');
        let mut f = self.file.lock();
        if let Err(e) = f.write_all(&line) {
            tracing::warn!(error = %e, "audit write failed");
        }
    }
}
