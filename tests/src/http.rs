//! One HTTP/1.1 exchange over a fresh connection, on TCP or a Unix socket.

use std::path::Path;
use std::time::Duration;

/// One HTTP/1.1 exchange over a fresh connection: (status, body).
pub fn http(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let (status, _, body) = http_response(url, method, headers, body);
    (status, body)
}

/// One HTTP/1.1 request; the status, the response headers (names in lower
/// case) and the body. A `Host` among `headers` replaces the URL's.
pub fn http_response(
    url: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    tcp_exchange(url, method, headers, body.as_bytes())
}

/// [`http`] with a body of raw bytes (not necessarily UTF-8).
pub fn http_bytes(url: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let (status, _, body) = tcp_exchange(url, method, headers, body);
    (status, body)
}

/// One exchange over TCP with an `http://host:port/path` URL.
fn tcp_exchange(
    url: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    exchange(s, host, method, &path, headers, body)
}

/// [`http`] over a Unix socket, with `Host: localhost` unless `headers`
/// name another.
pub fn unix_http(
    socket: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let s = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let (status, _, body) = exchange(s, "localhost", method, path, headers, body.as_bytes());
    (status, body)
}

fn exchange<S: std::io::Read + std::io::Write>(
    mut s: S,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, String) {
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {host}\r\n"));
    }
    req.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    ));
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut req = req.into_bytes();
    req.extend_from_slice(body);
    // The server may answer (413) and close before reading everything.
    let _ = s.write_all(&req);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_string(), b.to_string()))
        .unwrap_or_default();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body)
}

/// Opens an MCP session at `mcp_url` with `bearer` and the `initialize`
/// request `init`, over fresh connections that close after each exchange
/// (the session lives on at the gateway); returns its id, or the refusal.
pub fn open_mcp_session(mcp_url: &str, bearer: &str, init: &str) -> Result<String, (u16, String)> {
    const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
    const JSON: (&str, &str) = ("Content-Type", "application/json");
    let auth = format!("Bearer {bearer}");
    let (status, headers, body) = http_response(
        mcp_url,
        "POST",
        &[JSON, ACCEPT, ("Authorization", &auth)],
        init,
    );
    if status != 200 {
        return Err((status, body));
    }
    let id = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .ok_or((status, "no mcp-session-id in the answer".to_owned()))?;
    let (s, _, body) = http_response(
        mcp_url,
        "POST",
        &[
            JSON,
            ACCEPT,
            ("Authorization", &auth),
            ("mcp-session-id", &id),
        ],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    if s != 202 {
        return Err((s, body));
    }
    Ok(id)
}
