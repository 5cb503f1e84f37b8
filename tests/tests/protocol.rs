//! The gateway's wire behaviour: protocol versions, malformed JSON-RPC,
//! credentials, health, and the stateless 2026-07-28 revision.

use clankie_tests::{Stack, call, http, structured};
use rmcp::ClientServiceExt;
use serde_json::{Value, json};

/// The first JSON-RPC message in a JSON or SSE (possibly chunked) body.
fn first_message(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
        return v;
    }
    for line in body.lines() {
        if let Some(data) = line.strip_prefix("data:")
            && let Ok(v) = serde_json::from_str::<Value>(data.trim())
        {
            return v;
        }
        if let Ok(v) = serde_json::from_str::<Value>(line.trim())
            && v.is_object()
        {
            return v;
        }
    }
    Value::Null
}

fn initialize(version: &str) -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}
        }
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn versions_credentials_and_malformed_requests() {
    let stack = Stack::start().await.expect("stack");
    let token = stack.token("alpha");
    let auth = format!("Bearer {token}");
    let mcp = stack.mcp_url.clone();
    let base = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];

    for version in ["2025-06-18", "2025-11-25"] {
        let mut h = base.to_vec();
        h.push(("Authorization", &auth));
        let (status, body) = http(&mcp, "POST", &h, &initialize(version));
        assert_eq!(status, 200, "{body}");
        let msg = first_message(&body);
        assert_eq!(msg["result"]["protocolVersion"], version, "{body}");
        assert_eq!(msg["result"]["serverInfo"]["name"], "clankie");
        assert!(
            msg["result"]["capabilities"]["tools"]["listChanged"] == true,
            "{body}"
        );
    }

    // Missing and bad credentials: 401 with a reason code, before any MCP.
    let (status, body) = http(&mcp, "POST", &base, &initialize("2025-11-25"));
    assert_eq!(status, 401);
    assert_eq!(
        first_message(&body)["error"]["code"],
        "fleet_credential_required"
    );
    let mut h = base.to_vec();
    h.push(("Authorization", "Bearer clkf_wrong"));
    let (status, body) = http(&mcp, "POST", &h, &initialize("2025-11-25"));
    assert_eq!(status, 401);
    assert_eq!(
        first_message(&body)["error"]["code"],
        "fleet_credential_invalid"
    );
    let mut h = base.to_vec();
    h.push(("Authorization", "Basic abc"));
    let (status, _) = http(&mcp, "POST", &h, &initialize("2025-11-25"));
    assert_eq!(status, 401);

    // Malformed JSON-RPC gets a JSON-RPC error, never a crash.
    let mut h = base.to_vec();
    h.push(("Authorization", &auth));
    for garbage in [
        "{not json",
        "[]",
        "{\"jsonrpc\":\"2.0\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":42}",
        "\u{0}\u{1}\u{2}",
        "{\"jsonrpc\":\"1.0\",\"id\":null,\"method\":\"tools/list\"}",
    ] {
        let (status, body) = http(&mcp, "POST", &h, garbage);
        assert!(
            (400..500).contains(&status),
            "{garbage:?} → {status} {body}"
        );
        let msg = first_message(&body);
        assert!(msg.get("error").is_some(), "{garbage:?} → {body}");
    }
    // Random bodies (a seeded fuzz at the real boundary): every answer is a
    // 4xx, and the gateway stays healthy.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet = b"{}[]\":,0123456789-.eEtrufalsn \\\n\xffjsonrpcmethodidparams";
    for _ in 0..150 {
        let len = (next() % 300) as usize;
        let mut body = String::new();
        for _ in 0..len {
            body.push(alphabet[(next() % alphabet.len() as u64) as usize] as char);
        }
        let (status, _) = http(&mcp, "POST", &h, &body);
        assert!((400..500).contains(&status), "{body:?} → {status}");
    }

    // Oversized bodies are refused with a reason.
    let big = "x".repeat(5 << 20);
    let (status, body) = http(&mcp, "POST", &h, &big);
    assert_eq!(status, 413, "{body}");
    assert_eq!(first_message(&body)["error"]["code"], "payload_too_large");

    // Health: the process, and every service behind it.
    let (status, _) = http(&format!("{}/healthz", stack.url), "GET", &[], "");
    assert_eq!(status, 200);
    let (status, body) = http(&format!("{}/readyz", stack.url), "GET", &[], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(first_message(&body)["services"]["mcp-host"], "serving");
}

#[tokio::test(flavor = "multi_thread")]
async fn stateless_2026_07_28_clients_list_and_call() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    let _ = rustls::crypto::ring::default_provider().install_default();
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(stack.mcp_url.as_str()).auth_header(token),
    );
    let client = ()
        .serve_with_lifecycle(
            transport,
            rmcp::ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover");
    let info = client.peer_info().expect("peer info");
    assert_eq!(
        info.protocol_version,
        rmcp::model::ProtocolVersion::V_2026_07_28
    );
    assert_eq!(client.list_all_tools().await.expect("list").len(), 2);
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "time_get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}),
    )
    .await
    .expect("call");
    assert_eq!(structured(&r)["outcome"], "ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn trace_context_is_carried_from_the_client_through_every_hop() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let mut headers = std::collections::HashMap::new();
    headers.insert(
        http::HeaderName::from_static("traceparent"),
        http::HeaderValue::from_str(&format!("00-{trace_id}-00f067aa0ba902b7-01")).expect("header"),
    );
    use rmcp::ServiceExt as _;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(stack.mcp_url.as_str())
            .auth_header(token)
            .custom_headers(headers),
    );
    let client = ().serve(transport).await.expect("client");
    assert_eq!(
        clankie_tests::utc_now(&client).await.expect("call")["outcome"],
        "ok"
    );
    // The mcp-host recorded the dispatch under the caller's trace.
    let audit = clankie_tests::file_lines(&stack.state.path().join("audit/connected-calls.jsonl"));
    let dispatch: Value = serde_json::from_str(
        audit
            .iter()
            .find(|l| l.contains("\"dispatch\""))
            .expect("dispatch line"),
    )
    .expect("json");
    assert_eq!(dispatch["traceId"], trace_id);
}

/// A caller whose connection drops mid-call picks the stream up again with
/// `Last-Event-ID` (streamable HTTP resumption): the progress it missed and
/// the call's result arrive on the new connection, and the call ran once.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_call_stream_resumes_with_last_event_id() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let token = stack.token("resume");
    let member = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&member, "everything_trigger-long-running-operation").await;
    let out = std::process::Command::new(clankie_tests::python())
        .arg(clankie_tests::repo_root().join("tests/clients/resume_call.py"))
        .args([
            stack.mcp_url.as_str(),
            token.as_str(),
            "everything_trigger-long-running-operation",
            r#"{"duration": 2, "steps": 4}"#,
        ])
        .env("PATH", clankie_tests::peer_path())
        .output()
        .expect("resume_call.py");
    let said = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(said.trim())
        .unwrap_or_else(|e| panic!("{e}: {said} {}", String::from_utf8_lossy(&out.stderr)));
    assert!(v["firstId"].is_string(), "{v}");
    assert_eq!(v["status"], 200, "{v}");
    let kinds = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (before, after) = (kinds("before"), kinds("after"));
    // What came before the drop is not sent again; what came after is.
    let seen = before.last().cloned().unwrap_or_default();
    assert!(seen.starts_with("progress:"), "{v}");
    assert!(!after.contains(&seen), "replayed: {v}");
    // Every step once, across the two connections.
    let steps: Vec<&String> = before
        .iter()
        .chain(&after)
        .filter(|k| k.starts_with("progress:"))
        .collect();
    assert_eq!(
        steps,
        [
            "progress:1.0",
            "progress:2.0",
            "progress:3.0",
            "progress:4.0"
        ],
        "{v}"
    );
    assert_eq!(after.last().map(String::as_str), Some("result"), "{v}");
    let result = &v["result"];
    assert_ne!(result["isError"], true, "{v}");
    assert_eq!(result["_meta"]["clankie/outcome"], "ok", "{v}");
    // It ran once: one receipt, read back as the same call.
    let receipt = result["_meta"]["clankie/receiptId"]
        .as_str()
        .expect("receipt");
    let again = structured(
        &call(&member, "clankie_call", json!({ "receiptId": receipt }))
            .await
            .expect("read back"),
    );
    assert_eq!(again["fromReceipt"], true, "{again}");
}
