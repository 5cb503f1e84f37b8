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

/// The spans of one trace whose parent is not among them.
fn roots_of<'a>(spans: impl Iterator<Item = &'a Span> + Clone) -> Vec<&'a Span> {
    let ids: BTreeSet<&str> = spans.clone().map(|s| s.span.as_str()).collect();
    spans.filter(|s| !ids.contains(s.parent.as_str())).collect()
}

/// Checks that `spans` (one trace) form one tree hanging from `root_parent`
/// (the caller's own span, never exported; "" when the bridge began it).
fn assert_one_tree(spans: &[Span], root_parent: &str) {
    let roots = roots_of(spans.iter());
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
    // A tracker call: mcp-host asks the mailbox who the caller is, then the
    // tracker answers; both hops are in the caller's trace.
    let tracker_trace = "6df92f3577b34da6a3ce929d0e0e4738";
    let mut p = call("linear_list_teams", "", Some(tracker_trace));
    p.arguments = json!({"name": "linear_list_teams", "arguments": {}})
        .as_object()
        .cloned();
    let r = bridge.call_tool(p).await.expect("tracker call");
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
        let one = spans.iter().filter(|s| s.trace == trace);
        let services: BTreeSet<&str> = one.clone().map(|s| s.service.as_str()).collect();
        // A span can reach the receiver before its parent does (each
        // process batches on its own), so wait for a whole tree too.
        wanted.iter().all(|w| services.contains(w)) && roots_of(one).len() == 1
    };
    let with_tracker = |spans: &[Span]| {
        let services: BTreeSet<&str> = spans
            .iter()
            .filter(|s| s.trace == tracker_trace)
            .map(|s| s.service.as_str())
            .collect();
        complete(spans, tracker_trace)
            && services.contains("clankie-mailbox")
            && services.contains("clankie-tracker")
    };
    let spans = eventually(Duration::from_secs(20), async || {
        let spans = receiver.spans();
        ([trace, http_trace, &second]
            .iter()
            .all(|t| complete(&spans, t))
            && with_tracker(&spans))
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
    let tracked: Vec<Span> = spans
        .iter()
        .filter(|s| s.trace == tracker_trace)
        .cloned()
        .collect();
    assert_one_tree(&tracked, caller_span);
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

/// A CLI command is a trace of its own: the `cli.command` span is the
/// root, exported and flushed before the process ends, and the service it
/// asked answers inside that trace.
#[tokio::test(flavor = "multi_thread")]
async fn a_cli_command_exports_its_span_and_the_service_joins_its_trace() {
    let receiver = OtlpReceiver::start();
    let stack = Stack::start_with(StackOptions {
        env: otlp_env(receiver.grpc_endpoint(), "grpc"),
        ..Default::default()
    })
    .await
    .expect("stack");
    let out = stack
        .clankie_cmd(&["accounts", "--json"])
        .envs(otlp_env(receiver.http_endpoint(), "http/protobuf"))
        .output()
        .expect("clankie accounts");
    assert!(out.status.success(), "{out:?}");
    // The process has ended: its span is only there if it flushed at exit.
    let root = eventually(Duration::from_secs(5), async || {
        receiver
            .spans()
            .into_iter()
            .find(|s| s.service == "clankie-cli" && s.name == "cli.command")
    })
    .await
    .unwrap_or_else(|| panic!("the CLI flushed its span: {:#?}", receiver.spans()));
    assert_eq!(root.parent, "", "{root:#?}");
    let joined = eventually(Duration::from_secs(20), async || {
        let one: Vec<Span> = receiver
            .spans()
            .into_iter()
            .filter(|s| s.trace == root.trace)
            .collect();
        (one.iter().any(|s| s.service == "clankie-mcp-host") && roots_of(one.iter()).len() == 1)
            .then_some(one)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "mcp-host answered in the CLI's trace: {:#?}",
            receiver.spans()
        )
    });
    assert_eq!(roots_of(joined.iter())[0].span, root.span, "{joined:#?}");
}

/// Whether `traceparent` names `span` as its parent span.
fn untraced_parent_is(traceparent: &str, span: &str) -> bool {
    traceparent.split('-').nth(2) == Some(span)
}

/// A real Prometheus (Debian's) scraping `target`'s `/metrics` every
/// second with the bearer in `credentials`; killed on drop.
struct Prometheus {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    api: String,
    port: u16,
}

impl Prometheus {
    fn start(target: &str, credentials: &std::path::Path) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        // The shipped config and rules (`deploy/prometheus/`), aimed at
        // this stack and scraping every second.
        let shipped = clankie_tests::repo_root().join("deploy/prometheus");
        let text = std::fs::read_to_string(shipped.join("prometheus.yml")).expect("the config");
        let text = text
            .replace("15s", "1s")
            .replace("127.0.0.1:7755", target)
            .replace(
                "/etc/prometheus/clankie-owner.token",
                &credentials.display().to_string(),
            );
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, text).expect("write the scrape config");
        std::fs::copy(
            shipped.join("clankie.rules.yml"),
            dir.path().join("clankie.rules.yml"),
        )
        .expect("copy the rules");
        let port = free_port();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start prometheus (scripts/install-peers installs it)");
        Prometheus {
            child,
            _dir: dir,
            api: format!("http://127.0.0.1:{port}/api/v1"),
            port,
        }
    }

    /// The samples of an instant PromQL query: (labels, value).
    fn query(&self, promql: &str) -> Vec<(serde_json::Value, f64)> {
        // Not listening yet: no answer.
        if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            return Vec::new();
        }
        let url = format!("{}/query?query={}", self.api, urlencode(promql));
        let (status, body) = clankie_tests::http(&url, "GET", &[], "");
        if status != 200 {
            return Vec::new();
        }
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["data"]["result"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| {
                        let value = r["value"][1]
                            .as_str()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(f64::NAN);
                        (r["metric"].clone(), value)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_scrapes_every_service_and_counts_the_calls_driven() {
    let receiver = OtlpReceiver::start();
    let stack = Stack::start_with(StackOptions {
        env: otlp_env(receiver.grpc_endpoint(), "grpc"),
        ..Default::default()
    })
    .await
    .expect("stack");
    let dir = tempfile::tempdir().expect("tempdir");
    stack.connect_edge("edge", &dir.path().join("edge.log"), &[]);
    let token = stack.token("metrics");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "edge_traced").await;
    const CALLS: usize = 3;
    for i in 0..CALLS {
        let r = clankie_tests::call(
            &client,
            "clankie_call",
            json!({"name": "edge_traced", "arguments": {"tag": format!("m{i}")}}),
        )
        .await
        .expect("call");
        assert_eq!(structured(&r)["outcome"], "ok", "{r:?}");
    }

    // The page is the owner's: nobody else reads it, a fleet bearer
    // included.
    let metrics_url = format!("{}/metrics", stack.url);
    let (status, _) = clankie_tests::http(&metrics_url, "GET", &[], "");
    assert_eq!(status, 401);
    let fleet = format!("Bearer {token}");
    let (status, body) = clankie_tests::http(&metrics_url, "GET", &[("authorization", &fleet)], "");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("owner_credential_invalid"), "{body}");

    // One refusal at admission's door, counted by its reason.
    let (status, _) = clankie_tests::http(
        &stack.mcp_url,
        "POST",
        &[
            ("authorization", "Bearer clkf_not_a_link"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(status, 401);
    let target = stack.url.trim_start_matches("http://").to_owned();
    let credentials = stack.paths().owner_credential();
    let prometheus = Prometheus::start(&target, &credentials);
    let counted = eventually(Duration::from_secs(30), async || {
        let rows = prometheus.query(
            r#"sum(clankie_mcp_calls_total{account="edge",tool="traced",outcome="ok",service_name="clankie-mcp-host"})"#,
        );
        rows.first()
            .map(|(_, v)| *v)
            .filter(|v| *v == CALLS as f64)
    })
    .await;
    assert_eq!(
        counted,
        Some(CALLS as f64),
        "the call counter the test drove, through PromQL; target health: {:?}",
        prometheus.query("up")
    );
    // Every service answered the scrape, and each process's own series
    // came through the one page.
    let up = prometheus.query("clankie_service_up == 1");
    let services: BTreeSet<String> = up
        .iter()
        .filter_map(|(m, _)| m["service_name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        services.len(),
        6,
        "gateway and five backends up: {services:?}"
    );
    for (family, service) in [
        ("clankie_receipts_commits_total", "clankie-mcp-host"),
        (
            "http_server_request_duration_seconds_count",
            "clankie-gateway",
        ),
    ] {
        let rows = prometheus.query(&format!("{family}{{service_name=\"{service}\"}}"));
        assert!(!rows.is_empty(), "{family} from {service}");
    }
    let proofs = prometheus.query(r#"clankie_admission_proofs_total{door="bearer"}"#);
    assert!(
        proofs.first().is_some_and(|(_, v)| *v >= CALLS as f64),
        "{proofs:?}"
    );
    let refusals = prometheus.query(
        r#"clankie_admission_refusals_total{door="bearer",reason="fleet_credential_invalid"}"#,
    );
    assert_eq!(refusals.first().map(|r| r.1), Some(1.0), "{refusals:?}");
    // The shipped recording rules evaluate over the same series.
    let rate = eventually(Duration::from_secs(20), async || {
        let rows = prometheus.query(r#"clankie:mcp_calls:rate5m{account="edge",tool="traced"}"#);
        (!rows.is_empty()).then_some(rows)
    })
    .await;
    assert!(
        rate.is_some(),
        "the recording rule clankie:mcp_calls:rate5m"
    );
    // The same counter went out over OTLP.
    let otlp = eventually(Duration::from_secs(20), async || {
        receiver.metrics().into_iter().find(|m| {
            m["name"] == "clankie.mcp.calls"
                && m["service"] == "clankie-mcp-host"
                && m["value"].as_f64() == Some(CALLS as f64)
        })
    })
    .await;
    assert!(
        otlp.is_some(),
        "OTLP metrics: {:?}",
        receiver.metrics().len()
    );
}
