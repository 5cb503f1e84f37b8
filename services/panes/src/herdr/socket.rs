//! One exchange with a Herdr server's socket API: a newline-delimited JSON
//! request `{id, method, params}` and its response line `{id, result}` or
//! `{id, error: {code, message}}`. Reads go straight to the socket, never
//! through a Herdr CLI process. Used by admission (pane reads) and the
//! mailbox (opening and closing hired panes).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Why an exchange failed; fixed reasons, never paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HerdrError {
    /// Herdr answered `pane_not_found`.
    PaneNotFound,
    /// Herdr answered another error code.
    Refused(String),
    /// The socket could not be used, or the answer was not one.
    Unavailable(&'static str),
}

/// The `result` of one response line to request `id`, or its error.
pub fn parse_answer(line: &str, id: &str) -> Result<Value, HerdrError> {
    let v: Value =
        serde_json::from_str(line).map_err(|_| HerdrError::Unavailable("herdr_malformed"))?;
    if v["id"] != json!(id) {
        return Err(HerdrError::Unavailable("herdr_malformed"));
    }
    if let Some(err) = v.get("error") {
        let code = err["code"].as_str().unwrap_or("").to_string();
        if code == "pane_not_found" {
            return Err(HerdrError::PaneNotFound);
        }
        return Err(HerdrError::Refused(code));
    }
    Ok(v["result"].clone())
}

/// Sends `method` with `params` and returns the response's `result`.
pub async fn request(
    socket: &Path,
    method: &str,
    params: Value,
    timeout: Duration,
) -> Result<Value, HerdrError> {
    let exchange = async {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|_| HerdrError::Unavailable("herdr_unavailable"))?;
        let (read, mut write) = stream.into_split();
        let id = format!("clankie_{}", std::process::id());
        let mut line = json!({ "id": id, "method": method, "params": params }).to_string();
        line.push('\n');
        write
            .write_all(line.as_bytes())
            .await
            .map_err(|_| HerdrError::Unavailable("herdr_write_failed"))?;
        let mut reader = BufReader::new(read).take(1 << 20);
        let mut answer = String::new();
        reader
            .read_line(&mut answer)
            .await
            .map_err(|_| HerdrError::Unavailable("herdr_read_failed"))?;
        parse_answer(&answer, &id)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| HerdrError::Unavailable("herdr_timeout"))?
}
