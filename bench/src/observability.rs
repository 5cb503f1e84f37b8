//! Observability's cost: a `clankie_call` with OTLP export on (spans and
//! metrics to a real OTLP receiver) beside the same call with export off,
//! two stacks interleaved; and `GET /metrics` beside `/healthz` (one HTTP
//! round trip) on an idle stack, then with 1,000 MCP sessions open.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clankie_tests::otel::OtlpReceiver;
use clankie_tests::{Stack, StackOptions};

use crate::{Client, line, summarize, us};

/// One blocking HTTP GET, timed.
async fn timed_get(url: String, headers: Vec<(String, String)>) -> anyhow::Result<Duration> {
    tokio::task::spawn_blocking(move || {
        let h: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let t = Instant::now();
        let (status, _) = clankie_tests::http(&url, "GET", &h, "");
        let took = t.elapsed();
        anyhow::ensure!(status == 200, "GET {url}: {status}");
        Ok(took)
    })
    .await?
}

async fn scrape_vs_health(stack: &Stack, rounds: usize, label: &str) -> anyhow::Result<()> {
    let owner = std::fs::read_to_string(stack.paths().owner_credential())?;
    let auth = vec![(
        "authorization".to_owned(),
        format!("Bearer {}", owner.trim()),
    )];
    let (metrics, health) = (
        format!("{}/metrics", stack.url),
        format!("{}/healthz", stack.url),
    );
    for _ in 0..10 {
        timed_get(metrics.clone(), auth.clone()).await?;
        timed_get(health.clone(), Vec::new()).await?;
    }
    let (mut m, mut h) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        h.push(timed_get(health.clone(), Vec::new()).await?);
        m.push(timed_get(metrics.clone(), auth.clone()).await?);
    }
    let (ms, hs) = (summarize(m), summarize(h));
    line(&format!("/healthz ({label})"), &hs);
    line(&format!("/metrics ({label})"), &ms);
    println!(
        "  /metrics vs /healthz ({label}): p50 x{:.2}, p99 x{:.2}",
        us(ms.p50) / us(hs.p50).max(1e-9),
        us(ms.p99) / us(hs.p99).max(1e-9)
    );
    Ok(())
}

pub(crate) async fn bench_observability(rounds: usize, sessions: usize) -> anyhow::Result<()> {
    println!("== clankie_call with OTLP export on vs off; /metrics vs /healthz ==");
    let receiver = OtlpReceiver::start();
    let off = Stack::start().await?;
    let on = Stack::start_with(StackOptions {
        env: vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
                receiver.grpc_endpoint(),
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "grpc".into()),
        ],
        ..Default::default()
    })
    .await?;
    let mut clients: Vec<Client> = Vec::new();
    for stack in [&off, &on] {
        stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
        let token = stack.token("bench");
        clients.push(Arc::new(stack.client(&token).await?));
    }
    let (c_off, c_on) = (clients[0].clone(), clients[1].clone());
    for _ in 0..50 {
        crate::bridge_call(c_off.clone()).await?;
        crate::bridge_call(c_on.clone()).await?;
    }
    let (mut a, mut b) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let t = Instant::now();
        crate::bridge_call(c_off.clone()).await?;
        a.push(t.elapsed());
        let t = Instant::now();
        crate::bridge_call(c_on.clone()).await?;
        b.push(t.elapsed());
    }
    let (sa, sb) = (summarize(a), summarize(b));
    line("clankie_call, export off", &sa);
    line("clankie_call, OTLP export on", &sb);
    // Stopping the stack flushes its exporters, so the count that follows
    // shows the spans really left the processes.
    drop(on);
    println!(
        "  export overhead: p50 x{:.2}, p99 x{:.2} ({} spans received)",
        us(sb.p50) / us(sa.p50).max(1e-9),
        us(sb.p99) / us(sa.p99).max(1e-9),
        receiver.spans().len()
    );

    scrape_vs_health(&off, rounds.min(300), "idle").await?;
    // Sessions open on the gateway, one per seat, 50 per fleet link (the
    // per-principal cap is 64). Each is opened over connections that then
    // close, as a seat between calls holds no stream, so the gateway's
    // connection caps (256 per loopback address) do not bound the count.
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}})
    .to_string();
    let mut open = Vec::with_capacity(sessions);
    let per_link = 50;
    for i in 0..sessions.div_ceil(per_link) {
        let token = off.token(&format!("s{i}"));
        for _ in 0..per_link.min(sessions - open.len()) {
            let n = open.len();
            let id = clankie_tests::open_mcp_session(&off.mcp_url, &token, &init).map_err(
                |(status, body)| anyhow::anyhow!("opening session {n}: {status} {body}"),
            )?;
            open.push(id);
        }
    }
    scrape_vs_health(&off, rounds.min(300), &format!("{} sessions", open.len())).await?;
    Ok(())
}
