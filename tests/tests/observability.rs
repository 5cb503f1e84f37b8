//! What an operator sees: one trace per call across every process, read
//! back from a receiver built from the official OTLP definitions; metrics
//! a real Prometheus scrapes.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use clankie_tests::otel::{OtlpReceiver, Span};
use clankie_tests::{
    Stack, StackOptions, edge_server, eventually, file_lines, free_port, peer_path, python,
    structured,
};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

/// Our edge server over streamable HTTP; killed on drop.
struct EdgeHttp {
    child: std::process::Child,
    url: String,
}

impl EdgeHttp {
    fn start(log: &std::path::Path) -> Self {
        let port = free_port();
        let child = std::process::Command::new(python())
            .arg(edge_server())
            .args(["http", &port.to_string()])
            .env("EDGE_LOG", log)
            .env("PATH", peer_path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the edge server over HTTP");
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        EdgeHttp {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for EdgeHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The environment that sends a process's spans (and metrics) to `receiver`
/// over gRPC, exported promptly.
fn otlp_env(endpoint: String, protocol: &str) -> Vec<(String, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), protocol.into()),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into()),
        ("OTEL_METRIC_EXPORT_INTERVAL".into(), "500".into()),
    ]
}

/// The trace id of a W3C `traceparent`.
fn trace_of(traceparent: &str) -> String {
    traceparent.split('-').nth(1).unwrap_or_default().to_owned()
}

/// The edge log's line for `tag`: (traceparent in `_meta`, traceparent header).
fn edge_line(log: &std::path::Path, tag: &str) -> Option<(String, String)> {
    file_lines(log).iter().find_map(|l| {
        let rest = l.strip_prefix(&format!("{tag} meta="))?;
        let (meta, header) = rest.split_once(" header=")?;
        Some((meta.to_owned(), header.to_owned()))
    })
}

/// Checks that `spans` (one trace) form one tree hanging from `root_parent`
/// (the caller's own span, never exported; "" when the bridge began it).
fn assert_one_tree(spans: &[Span], root_parent: &str) {
    let ids: BTreeSet<&str> = spans.iter().map(|s| s.span.as_str()).collect();
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| !ids.contains(s.parent.as_str()))
        .collect();
    assert_eq!(
        roots.len(),
        1,
        "one root, hanging from the caller: {roots:#?}\nall: {spans:#?}"
    );
    assert_eq!(roots[0].parent, root_parent, "{roots:#?}");
    assert_eq!(roots[0].service, "clankie-fleet-bridge", "{roots:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_call_through_the_bridge_is_one_trace_across_every_process_and_upstream() {
    let receiver = OtlpReceiver::start();
    let stack = Stack::start_with(StackOptions {
        env: otlp_env(receiver.grpc_endpoint(), "grpc"),
        ..Default::default()
    })
    .await
    .expect("stack");
    let dir = tempfile::tempdir().expect("tempdir");
    let stdio_log = dir.path().join("stdio.log");
    let http_log = dir.path().join("http.log");
    stack.connect_edge("edge", &stdio_log, &[]);
    let edge_http = EdgeHttp::start(&http_log);
    stack.clankie_ok(&["connect", "edgeh", "--url", &edge_http.url]);
    let token = stack.token("otel");
    // The bridge exports over the other OTLP transport.
    let bridge_env = otlp_env(receiver.http_endpoint(), "http/protobuf");
    let bridge_env: Vec<(&str, &str)> = bridge_env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let bridge = stack
        .fleet_bridge_with(&token, &bridge_env)
        .await
        .expect("bridge");
    clankie_tests::wait_tool(&bridge, "edge_traced").await;
    clankie_tests::wait_tool(&bridge, "edgeh_traced").await;

    // The caller's own spans, as an MCP client names them (SEP-414): one
    // trace for the stdio call, another for the HTTP one.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let http_trace = "5cf92f3577b34da6a3ce929d0e0e4737";
    let caller_span = "00f067aa0ba902b7";
    let call = |tool: &str, tag: &str, trace: Option<&str>| {
        let mut p = CallToolRequestParams::new("clankie_call");
        p.arguments = json!({"name": tool, "arguments": {"tag": tag}})
            .as_object()
            .cloned();
        if let Some(trace) = trace {
            use rmcp::model::RequestParamsMeta as _;
            p.set_traceparent(&format!("00-{trace}-{caller_span}-01"));
        }
        p
    };
    for (tool, tag, t) in [
        ("edge_traced", "stdio", trace),
        ("edgeh_traced", "http", http_trace),
    ] {
        let r = bridge
            .call_tool(call(tool, tag, Some(t)))
            .await
            .expect("call");
        assert_eq!(structured(&r)["outcome"], "ok", "{r:?}");
    }
    // A third call in the same session, without a context of its own.
    let r = bridge
        .call_tool(call("edge_traced", "untraced", None))
        .await
        .expect("call");
    assert_eq!(structured(&r)["outcome"], "ok", "{r:?}");

    // The upstreams heard the caller's trace: a stdio one in `_meta`, an
    // HTTP one in `_meta` and as the `traceparent` header.
    let (meta, header) = edge_line(&stdio_log, "stdio").expect("the stdio upstream ran");
    assert_eq!(trace_of(&meta), trace, "{meta}");
    assert_eq!(header, "-");
    let (meta, header) = edge_line(&http_log, "http").expect("the HTTP upstream ran");
    assert_eq!(trace_of(&meta), http_trace, "{meta}");
    assert_eq!(header, meta, "the header carries the same context");
    let (untraced, _) = edge_line(&stdio_log, "untraced").expect("the third call ran");
    let second = trace_of(&untraced);
    assert!(
        second.len() == 32 && second != trace,
        "a call is its own trace, never its session's: {untraced}"
    );

    // The bridge flushes at exit; the services as they go.
    drop(bridge);
    let wanted = [
        "clankie-fleet-bridge",
        "clankie-gateway",
        "clankie-admission",
        "clankie-mcp-host",
    ];
    let complete = |spans: &[Span], trace: &str| {
        let services: BTreeSet<&str> = spans
            .iter()
            .filter(|s| s.trace == trace)
            .map(|s| s.service.as_str())
            .collect();
        wanted.iter().all(|w| services.contains(w))
    };
    let spans = eventually(Duration::from_secs(20), async || {
        let spans = receiver.spans();
        [trace, http_trace, &second]
            .iter()
            .all(|t| complete(&spans, t))
            .then_some(spans)
    })
    .await;
    let spans = spans.unwrap_or_else(|| {
        let by: HashMap<String, usize> =
            receiver.spans().iter().fold(HashMap::new(), |mut m, s| {
                *m.entry(format!("{} {}", s.trace, s.service)).or_default() += 1;
                m
            });
        panic!("spans by trace and service: {by:#?}")
    });
    for t in [trace, http_trace] {
        let one: Vec<Span> = spans.iter().filter(|s| s.trace == t).cloned().collect();
        assert_one_tree(&one, caller_span);
        // The upstream hop is a span of its own, in the caller's trace.
        let upstream = one.iter().filter(|s| s.name == "mcp.upstream_call").count();
        assert_eq!(upstream, 1, "{one:#?}");
    }
    let untraced: Vec<Span> = spans
        .iter()
        .filter(|s| s.trace == second)
        .cloned()
        .collect();
    assert_one_tree(&untraced, "");
    // What the upstream heard is the upstream span itself.
    let hop = untraced
        .iter()
        .find(|s| s.name == "mcp.upstream_call")
        .expect("the upstream span");
    assert!(untraced_parent_is(
        &edge_line(&stdio_log, "untraced").expect("ran").0,
        &hop.span
    ));
}

/// Whether `traceparent` names `span` as its parent span.
fn untraced_parent_is(traceparent: &str, span: &str) -> bool {
    traceparent.split('-').nth(2) == Some(span)
}
