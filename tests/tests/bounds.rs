//! The gateway's bounds, with real clients on real sockets: malformed and
//! duplicate requests get clear answers and never hang, sessions and
//! connections are capped, and slow or silent clients are closed.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use clankie_tests::{Stack, StackOptions, http_response, open_mcp_session};
use serde_json::{Value, json};

const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");

fn init_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bounds", "version": "0"}}})
    .to_string()
}

/// Opens an MCP session with `bearer`; returns its id, or the refusal.
fn open_session(stack: &Stack, bearer: &str) -> Result<String, (u16, String)> {
    open_mcp_session(&stack.mcp_url, bearer, &init_body())
}

fn post(stack: &Stack, bearer: &str, session: &str, body: &str) -> (u16, String) {
    let auth = format!("Bearer {bearer}");
    let (s, _, b) = http_response(
        &stack.mcp_url,
        "POST",
        &[
            JSON,
            ACCEPT,
            ("Authorization", &auth),
            ("mcp-session-id", session),
        ],
        body,
    );
    (s, b)
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_json_is_400_and_a_duplicate_id_in_flight_is_refused_not_left_hanging() {
    let stack = Stack::start().await.expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "edge_slow").await;
    let session = open_session(&stack, &token).expect("session");

    // Not JSON, whatever the content type says.
    for ct in ["application/json", "text/plain"] {
        let auth = format!("Bearer {token}");
        let (s, _, b) = http_response(
            &stack.mcp_url,
            "POST",
            &[
                ("Content-Type", ct),
                ACCEPT,
                ("Authorization", &auth),
                ("mcp-session-id", &session),
            ],
            "{not json",
        );
        assert_eq!(s, 400, "{ct}: {b}");
        assert!(b.contains("-32700"), "{b}");
    }
    // A JSON-RPC id past its bound.
    let long = json!({"jsonrpc": "2.0", "id": "x".repeat(4096), "method": "tools/list"});
    let (s, b) = post(&stack, &token, &session, &long.to_string());
    assert_eq!(s, 400, "{b}");
    assert!(b.len() < 2048, "the refusal does not echo the id");
    // Malformed JSON-RPC is a 400 with its JSON-RPC code, never a 415.
    for (body, code) in [
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#.to_string(),
            "-32600",
        ),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_string(),
            "-32600",
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_string(),
            "-32600",
        ),
        (r#"{"jsonrpc":"2.0","id":1}"#.to_string(), "-32600"),
    ] {
        let (s, b) = post(&stack, &token, &session, &body);
        assert_eq!(s, 400, "{body}: {b}");
        assert!(b.contains(code), "{body}: {b}");
    }
    // Bytes that are not UTF-8: a parse error.
    let raw = clankie_tests::http_bytes(
        &stack.mcp_url,
        "POST",
        &[
            JSON,
            ACCEPT,
            ("Authorization", &format!("Bearer {token}")),
            ("mcp-session-id", &session),
        ],
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}",
    );
    assert_eq!(raw.0, 400, "{}", raw.1);
    assert!(raw.1.contains("-32700"), "{}", raw.1);
    // No OAuth here: the metadata a client probes for is not found (not a
    // 401 that starts an OAuth flow), and neither is any other path.
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/",
    ] {
        let (s, b) = clankie_tests::http(&format!("{}{path}", stack.url), "GET", &[], "");
        assert_eq!(s, 404, "{path}: {b}");
        assert!(b.contains("route_not_found"), "{path}: {b}");
    }
    // Ending a session answers 204, and the session is gone.
    let ended = open_session(&stack, &token).expect("a session to end");
    let auth = format!("Bearer {token}");
    let (s, _, b) = http_response(
        &stack.mcp_url,
        "DELETE",
        &[ACCEPT, ("Authorization", &auth), ("mcp-session-id", &ended)],
        "",
    );
    assert_eq!(s, 204, "{b}");
    let (s, b) = post(
        &stack,
        &token,
        &ended,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(s, 404, "ended: {b}");

    // Two requests with one id on one session, the first still running.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "clankie_call",
        "arguments": {"name": "edge_slow", "arguments": {"seconds": 2, "tag": "dup-first"}}}})
    .to_string();
    let first = {
        let (stack_url, token, session, call) = (
            stack.mcp_url.clone(),
            token.clone(),
            session.clone(),
            call.clone(),
        );
        std::thread::spawn(move || {
            let auth = format!("Bearer {token}");
            http_response(
                &stack_url,
                "POST",
                &[
                    JSON,
                    ACCEPT,
                    ("Authorization", &auth),
                    ("mcp-session-id", &session),
                ],
                &call,
            )
        })
    };
    assert!(clankie_tests::wait_file_line(&log, "dup-first", Duration::from_secs(20)).await);
    let (s, b) = post(
        &stack,
        &token,
        &session,
        &call.replace("dup-first", "dup-second"),
    );
    assert_eq!(s, 400, "the duplicate is refused at once: {b}");
    assert!(b.contains("still being answered"), "{b}");
    assert!(b.contains("\"id\":7"), "the refusal answers that id: {b}");
    let (s, _, b) = first.join().expect("first");
    assert_eq!(s, 200);
    assert!(b.contains("slept 2"), "the first is answered: {b}");
    assert_eq!(
        clankie_tests::file_lines(&log),
        vec!["dup-first".to_string()]
    );
    // Once answered, the id is free again.
    let again = call.replace("\"seconds\":2", "\"seconds\":0");
    let (s, b) = post(
        &stack,
        &token,
        &session,
        &again.replace("dup-first", "dup-third"),
    );
    assert_eq!(s, 200, "{b}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_capped_per_principal_and_in_total() {
    let stack = Stack::start_with(StackOptions {
        env: vec![
            ("CLANKIE_MAX_SESSIONS_PER_PRINCIPAL".into(), "3".into()),
            ("CLANKIE_MAX_SESSIONS".into(), "5".into()),
        ],
        ..Default::default()
    })
    .await
    .expect("stack");
    let (a, b, c) = (
        stack.token("alpha"),
        stack.token("beta"),
        stack.token("gamma"),
    );
    let mine: Vec<String> = (0..3)
        .map(|_| open_session(&stack, &a).expect("open"))
        .collect();
    let (status, body) = open_session(&stack, &a).expect_err("past the cap");
    assert_eq!(status, 429, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["error"]["code"], "too_many_sessions");
    // Another principal has its own room, until the total is reached.
    open_session(&stack, &b).expect("beta one");
    open_session(&stack, &b).expect("beta two");
    let (status, _) = open_session(&stack, &c).expect_err("total reached");
    assert_eq!(status, 429);
    // Closing one makes room again.
    let auth = format!("Bearer {a}");
    let (s, _, _) = http_response(
        &stack.mcp_url,
        "DELETE",
        &[
            ACCEPT,
            ("Authorization", &auth),
            ("mcp-session-id", &mine[0]),
        ],
        "",
    );
    assert!(s == 200 || s == 204 || s == 202, "delete: {s}");
    open_session(&stack, &a).expect("room again");
}

/// Opens `n` TCP connections to `addr` that send nothing.
fn silent(addr: &str, n: usize) -> Vec<std::net::TcpStream> {
    (0..n)
        .filter_map(|_| std::net::TcpStream::connect(addr).ok())
        .collect()
}

/// Reads until the peer closes (or `limit` passes); returns what was read.
fn read_to_close(s: &mut std::net::TcpStream, limit: Duration) -> Option<String> {
    s.set_read_timeout(Some(limit)).ok()?;
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => Some(String::from_utf8_lossy(&out).to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
            Some(String::from_utf8_lossy(&out).to_string())
        }
        Err(_) => None,
    }
}

/// The flood scenario's header timeout.
const HEADER_TIMEOUT_MS: u64 = 12_000;

#[tokio::test(flavor = "multi_thread")]
async fn floods_displace_themselves_and_slow_clients_are_closed_while_members_are_served() {
    let stack = Stack::start_with(StackOptions {
        env: vec![
            // Eviction starts at a quarter of this (3 s): far longer than the
            // burst of connections below takes even on a loaded machine.
            (
                "CLANKIE_HEADER_TIMEOUT_MS".into(),
                HEADER_TIMEOUT_MS.to_string(),
            ),
            ("CLANKIE_MAX_WAITING".into(), "40".into()),
        ],
        ..Default::default()
    })
    .await
    .expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    let member = stack.client(&token).await.expect("member");
    clankie_tests::wait_tool(&member, "time_get_current_time").await;
    drop(member);
    let addr = stack.url.trim_start_matches("http://").to_string();

    // A flood of silent connections past the waiting cap: the newcomers are
    // told to retry (503) without their request being read. A newcomer may
    // instead take the place of a connection that was already waiting long
    // enough before the flood (an HTTP client's spare pooled connection,
    // say); it then waits like the flood. Only those few can be admitted.
    let opened = Instant::now();
    let mut flood = silent(&addr, 40);
    let mut extra = silent(&addr, 10);
    let mut turned_away = 0;
    for s in extra.iter_mut() {
        if let Some(answer) = read_to_close(s, Duration::from_secs(5)) {
            assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
            assert!(
                answer.contains("service_unavailable") && answer.contains("Retry-After"),
                "{answer}"
            );
            turned_away += 1;
        }
    }
    assert!(
        turned_away >= extra.len() / 2,
        "newcomers past the cap are turned away ({turned_away} of {})",
        extra.len()
    );
    // A member still gets in: once the flood has waited a while, a new
    // connection displaces its oldest. The member retries what the gateway
    // called retryable.
    let mut served = 0;
    let patience = Instant::now() + Duration::from_millis(HEADER_TIMEOUT_MS);
    while Instant::now() < patience {
        let ok = match stack.client(&token).await {
            Ok(fresh) => clankie_tests::utc_now(&fresh)
                .await
                .is_ok_and(|b| b["outcome"] == "ok"),
            Err(_) => false,
        };
        if ok {
            served += 1;
            if served == 3 {
                break;
            }
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(served, 3, "members are served beside the flood");
    // An evicted connection is closed at once; one that was not is closed
    // only at the header timeout. Whatever closes before that was evicted,
    // however slowly a loaded machine gets round to it.
    let before_timeout = (opened + Duration::from_millis(HEADER_TIMEOUT_MS - 1_000))
        .saturating_duration_since(Instant::now());
    let until = Instant::now() + before_timeout;
    let evicted = flood
        .iter_mut()
        .filter_map(|s| {
            let left = until.saturating_duration_since(Instant::now());
            read_to_close(s, left.max(Duration::from_millis(1)))
        })
        .count();
    assert!(evicted >= 1, "silent connections made room for the members");
    // The rest are closed once the header timeout passes.
    for s in flood.iter_mut() {
        assert!(
            read_to_close(s, Duration::from_millis(HEADER_TIMEOUT_MS + 10_000)).is_some(),
            "a silent connection is closed"
        );
    }
    // A slow client trickling its head is cut off before it finishes.
    let mut slow = std::net::TcpStream::connect(&addr).expect("slow");
    slow.set_read_timeout(Some(Duration::from_millis(200))).ok();
    let started = Instant::now();
    let mut closed = false;
    let head = b"POST /mcp HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for b in head.iter().chain(std::iter::repeat(&b'a')) {
        if slow.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        let mut probe = [0u8; 256];
        if slow.read(&mut probe).is_ok() {
            // An answer (408) or the close: either way it is over.
            closed = true;
            break;
        }
        if started.elapsed() > Duration::from_millis(HEADER_TIMEOUT_MS + 15_000) {
            break;
        }
    }
    assert!(closed, "a trickling head is cut off");
}

#[tokio::test(flavor = "multi_thread")]
async fn service_logs_rotate_at_their_cap() {
    let cap = 16_000u64;
    let stack = Stack::start_with(StackOptions {
        env: vec![("CLANKIE_LOG_MAX_BYTES".into(), cap.to_string())],
        ..Default::default()
    })
    .await
    .expect("stack");
    // Every refused request logs one line at the gateway.
    let logs = stack.state.path().join("logs");
    for _ in 0..2000 {
        let (s, _) = clankie_tests::http(&stack.mcp_url, "POST", &[JSON, ACCEPT], &init_body());
        assert_eq!(s, 401);
        if logs.join("gateway.log.2").exists() {
            break;
        }
    }
    assert!(logs.join("gateway.log.1").exists(), "rotated once");
    assert!(logs.join("gateway.log.2").exists(), "rotated twice");
    assert!(!logs.join("gateway.log.3").exists(), "two old files kept");
    for f in ["gateway.log.1", "gateway.log.2"] {
        let len = std::fs::metadata(logs.join(f)).expect("log").len();
        assert!(len <= cap + 4096, "{f} is {len} bytes, past its cap");
    }
}

/// A `GET /healthz` on `s`, kept alive; true once its answer was read.
fn healthz_kept_alive<S: std::io::Read + std::io::Write>(s: &mut S) -> bool {
    if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while !got.ends_with(br#"{"status":"ok"}"#) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    got.starts_with(b"HTTP/1.1 200")
}

/// One local process holds keep-alive connections, each of which sent one
/// unauthenticated request, past every connection cap, on the bearer TCP
/// listener and on the local Unix socket. Members beside it are never
/// refused: a bearer member on fresh connections, and a pane's seat whose
/// every request opens a new Unix connection.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_flood_of_keep_alive_connections_never_locks_a_member_out() {
    const CAP: usize = 48;
    let stack = Stack::start_with(StackOptions {
        env: vec![
            ("CLANKIE_MAX_CONNECTIONS".into(), CAP.to_string()),
            (
                "CLANKIE_MAX_CONNECTIONS_PER_PEER".into(),
                (CAP / 2).to_string(),
            ),
        ],
        ..Default::default()
    })
    .await
    .expect("stack");
    let tmux = stack.link_tmux("work");
    let _workspace = stack.add_project("alpha", &[]);
    let lead = stack.add_lead("Lead");
    let dir = tempfile::tempdir().expect("dir");
    let seat = clankie_tests::seat::Seat::hire(&stack, dir.path(), "a", &lead).await;
    let token = stack.token("alpha");
    let addr = stack.url.trim_start_matches("http://").to_string();
    let unix = stack.state.path().join("run/fleet/mcp.sock");

    // The flood: twice the cap on each listener, each connection answered
    // once and then held open.
    let mut tcp_flood = Vec::new();
    let mut unix_flood = Vec::new();
    let mut answered = 0;
    for _ in 0..2 * CAP {
        if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            answered += usize::from(healthz_kept_alive(&mut s));
            tcp_flood.push(s);
        }
        if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&unix) {
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            answered += usize::from(healthz_kept_alive(&mut s));
            unix_flood.push(s);
        }
    }
    // At least a full listener's worth was answered and is held open.
    assert!(
        answered >= CAP,
        "the flood's requests were answered: {answered}"
    );

    // Members: every call on a fresh connection, every one served.
    for i in 0..20 {
        let (status, body) = clankie_tests::http(
            &stack.mcp_url,
            "POST",
            &[JSON, ACCEPT, ("Authorization", &format!("Bearer {token}"))],
            &init_body(),
        );
        assert_eq!(status, 200, "bearer member call {i}: {body}");
        let polled = seat
            .run(json!({ "http": ["GET", "/v1/fleet/seats/{pane}/mailbox?wait=0", null] }))
            .await;
        assert_eq!(polled["status"], 200, "seat call {i}: {polled}");
        // The flood keeps coming back for its places.
        for _ in 0..4 {
            if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                s.set_read_timeout(Some(Duration::from_secs(5))).ok();
                healthz_kept_alive(&mut s);
                tcp_flood.push(s);
            }
            if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&unix) {
                s.set_read_timeout(Some(Duration::from_secs(5))).ok();
                healthz_kept_alive(&mut s);
                unix_flood.push(s);
            }
        }
    }
    drop(tmux);
}

/// Sends a POST's head, gives a server that answers from the head alone the
/// chance to answer and close (it has, if anything arrives within half a
/// second), then sends the body and reads the answer: (body written,
/// status, answer).
fn head_then_body<S: std::io::Read + std::io::Write + std::os::fd::AsFd>(
    s: &mut S,
    headers: &[(&str, &str)],
    body: &str,
) -> (bool, u16, String) {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).expect("head");
    let mut fds = [nix::poll::PollFd::new(
        s.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(500u16));
    let written = s.write_all(body.as_bytes()).is_ok();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (written, status, text)
}

/// A request refused from its head alone (an unproven local process, a
/// missing bearer, a foreign origin) is still answered to a client that
/// writes its body after its head, as Python's `http.client` does: the
/// connection is not closed under the body, and the client reads why.
#[tokio::test(flavor = "multi_thread")]
async fn a_refusal_from_the_head_alone_reaches_a_client_that_sends_its_body_after() {
    let stack = Stack::start().await.expect("stack");
    let unix = stack.state.path().join("run/fleet/mcp.sock");
    let addr = stack.url.trim_start_matches("http://").to_string();
    let body = init_body();
    type Send<'a> = Box<dyn Fn() -> (bool, u16, String) + 'a>;
    let cases: Vec<(&str, Send, u16, &str)> = vec![
        (
            "a local process in no pane",
            Box::new(|| {
                let mut s = std::os::unix::net::UnixStream::connect(&unix).expect("unix");
                head_then_body(&mut s, &[JSON, ACCEPT], &body)
            }),
            403,
            "local_process_membership_required",
        ),
        (
            "no bearer on TCP",
            Box::new(|| {
                let mut s = std::net::TcpStream::connect(&addr).expect("tcp");
                head_then_body(&mut s, &[JSON, ACCEPT], &body)
            }),
            401,
            "fleet_credential_required",
        ),
        (
            "a foreign origin",
            Box::new(|| {
                let mut s = std::net::TcpStream::connect(&addr).expect("tcp");
                let origin = ("Origin", "https://evil.example");
                head_then_body(&mut s, &[JSON, ACCEPT, origin], &body)
            }),
            403,
            "origin_not_allowed",
        ),
    ];
    for (what, send, status, code) in cases {
        let (written, got, text) = send();
        assert!(written, "{what}: the body was written");
        assert_eq!(got, status, "{what}: {text}");
        assert!(text.contains(code), "{what}: {text}");
    }
}

/// A stop that answers: SIGTERM to `clankie up` while calls run. The
/// gateway takes nothing new, lets short calls finish, and answers every
/// call still open at the end of its drain `uncertain` with its receipt id,
/// over raw HTTP and through the stdio bridge alike, before it closes.
#[tokio::test(flavor = "multi_thread")]
async fn a_stop_answers_every_open_call_with_its_receipt() {
    let mut stack = Stack::start().await.expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "edge_slow").await;

    let body = |id: &str, seconds: u64| {
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "clankie_call",
            "arguments": {"name": "edge_slow", "receiptId": id,
                          "arguments": {"seconds": seconds, "tag": id}}}})
        .to_string()
    };
    // Raw HTTP callers: ten long calls and one that ends within the drain.
    let mut raw = Vec::new();
    for n in 0..11 {
        let session = open_session(&stack, &token).expect("session");
        let (url, token) = (stack.mcp_url.clone(), token.clone());
        let id = format!("stop-raw-{n}");
        let seconds = if n == 10 { 2 } else { 60 };
        let call = body(&id, seconds);
        raw.push((
            id,
            seconds,
            std::thread::spawn(move || {
                let auth = format!("Bearer {token}");
                http_response(
                    &url,
                    "POST",
                    &[
                        JSON,
                        ACCEPT,
                        ("Authorization", &auth),
                        ("mcp-session-id", &session),
                    ],
                    &call,
                )
            }),
        ));
    }
    // Bridge callers: ten long calls through `clankie mcp --fleet`.
    let bridge = std::sync::Arc::new(stack.fleet_bridge(&token).await.expect("bridge"));
    clankie_tests::wait_tool(&bridge, "edge_slow").await;
    let mut bridged = Vec::new();
    for n in 0..10 {
        let id = format!("stop-bridge-{n}");
        let bridge = bridge.clone();
        let args = json!({"name": "edge_slow", "receiptId": id,
                          "arguments": {"seconds": 60, "tag": id}});
        bridged.push((
            id,
            tokio::spawn(async move { clankie_tests::call(&bridge, "clankie_call", args).await }),
        ));
    }
    assert!(
        clankie_tests::wait_file_lines(&log, 21, Duration::from_secs(60)).await,
        "every call dispatched: {:?}",
        clankie_tests::file_lines(&log)
    );

    let addr = stack
        .url
        .strip_prefix("http://")
        .expect("http url")
        .to_owned();
    let stopped = tokio::task::spawn_blocking(move || {
        let clean = stack.stop();
        (clean, stack)
    });
    // The stop accepts nothing new while the calls in flight are still open.
    let closed = clankie_tests::eventually(Duration::from_secs(10), async || {
        std::net::TcpStream::connect(&addr).is_err().then_some(())
    })
    .await;
    assert!(closed.is_some(), "the gateway still accepts after SIGTERM");
    assert!(
        raw.iter()
            .filter(|(_, seconds, _)| *seconds == 60)
            .all(|(_, _, t)| !t.is_finished()),
        "refused new connections while the open calls drain"
    );
    for (id, seconds, t) in raw {
        let (status, _, answer) = t.join().expect("raw caller");
        assert_eq!(status, 200, "{id}: {answer}");
        assert!(answer.contains(&id), "{id} is named: {answer}");
        let word = if seconds == 2 {
            "\"ok\""
        } else {
            "\"uncertain\""
        };
        assert!(answer.contains(word), "{id} answers {word}: {answer}");
    }
    for (id, t) in bridged {
        let r = t.await.expect("bridge caller").expect("an answer");
        let meta = r.meta.clone().unwrap_or_default();
        assert_eq!(meta.get("clankie/receiptId"), Some(&json!(id)), "{r:?}");
        assert_eq!(
            meta.get("clankie/outcome"),
            Some(&json!("uncertain")),
            "{r:?}"
        );
    }
    let (clean, _stack) = stopped.await.expect("stop");
    assert!(clean, "the stack stopped cleanly");
}

/// A harness with more calls in flight than its pane's share of gateway
/// connections (64 proven connections a member) loses none of them. Each
/// call holds a connection of its own for two seconds; the bridge keeps
/// the calls past its own bound waiting within their budget, so the door
/// never turns one away, and no refused request takes the others on the
/// session down with it as "uncertain".
#[tokio::test(flavor = "multi_thread")]
async fn a_seat_with_more_calls_in_flight_than_its_connection_share_loses_none() {
    use clankie_tests::seat::{Harness, Seat};
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let tmux = stack.link_tmux("work");
    let _workspace = stack.add_project("alpha", &[]);
    stack.bind_builtin("alpha", 1, "ENG");
    let dir = tempfile::tempdir().expect("dir");
    let flags = ["--project", "alpha", "--role", "worker"];
    let seat = Seat::start(&stack, dir.path(), "busy", Harness::Tracker, &flags).await;
    const CALLS: usize = 100;
    let batch: Vec<Value> = (0..CALLS)
        .map(|_| {
            json!({
                "call": "everything_trigger-long-running-operation",
                "args": { "duration": 2, "steps": 1 }
            })
        })
        .collect();
    let results = seat.run(json!({ "batch": batch })).await;
    let results = results.as_array().expect("results");
    assert_eq!(results.len(), CALLS);
    let failed: Vec<&Value> = results
        .iter()
        .filter(|r| r["isError"] != false || r["result"]["outcome"] != "ok")
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {CALLS} not answered ok, first: {:?}",
        failed.len(),
        failed.first()
    );
    drop(tmux);
}
