//! A many-host fleet: one main stack and H remote machines, each a whole
//! stack in its own network namespace joined to the main by a veth pair,
//! enrolled and linked over TLS; S callers on each machine.
//!
//! A caller is a process in a pane of the machine's linked tmux session
//! (`clankie-bench fleet-caller`): it speaks MCP to its own stack's local
//! socket, where it is proven from that machine's kernel facts, and makes
//! `clankie_call` (mcp-server-time on the main stack) every interval, so
//! every call crosses its machine's link. The lighter stand-in for a
//! worker: no harness and no bridge, a real pane and a real proof.
//!
//! Beside it in the same run, the single-host figure: the same number of
//! callers at the same rate in panes of the main stack's own session.
//!
//! Reported:
//! - calls per second through the main stack, relayed and single-host;
//! - latency per call, and what the relay adds (p50 and p99 apart);
//! - the main stack's memory per link (gateway and admission, before and
//!   after the links came up, with no calls running);
//! - how long after the main stack restarts every link is up again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clankie_tests::netns::NetStar;
use clankie_tests::{Stack, StackOptions, TmuxServer, bin_dir};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::faults::rss_kib;
use crate::{line, summarize};

/// `clankie-bench fleet-caller SOCKET INTERVAL_MS OUT STOP`: inside a pane,
/// call `clankie_call` through the stack's local socket every interval
/// (from a random start) until STOP exists; one line per call in OUT:
/// `UNIX_MS ok|CODE MICROS`.
pub async fn caller_mode(args: &[String]) -> anyhow::Result<()> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let [socket, interval, out, stop] = args else {
        anyhow::bail!("usage: clankie-bench fleet-caller SOCKET INTERVAL_MS OUT STOP");
    };
    let interval = Duration::from_millis(interval.parse()?);
    let (out, stop) = (PathBuf::from(out), PathBuf::from(stop));
    let client = clankie_runtime::telemetry::mcp_unix_client(Path::new(socket));
    let cfg = StreamableHttpClientTransportConfig::with_uri("http://localhost/mcp");
    let service = ().serve(StreamableHttpClientTransport::with_client(client, cfg)).await?;
    let mut next = Instant::now() + interval.mul_f64(rand_unit());
    let mut lines = String::new();
    while !stop.exists() {
        tokio::time::sleep_until(next.into()).await;
        next += interval;
        let mut p = CallToolRequestParams::new("clankie_call");
        p.arguments =
            json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}})
                .as_object()
                .cloned();
        let began = Instant::now();
        let r = service.call_tool(p).await;
        let took = began.elapsed().as_micros();
        let said = match &r {
            Ok(r) if r.is_error != Some(true) => "ok".to_string(),
            Ok(r) => r
                .structured_content
                .as_ref()
                .and_then(|s| s["error"]["code"].as_str())
                .unwrap_or("error")
                .to_string(),
            Err(_) => "transport".to_string(),
        };
        lines.push_str(&format!("{} {said} {took}\n", clankie_runtime::now_ms()));
        // Written as it goes, so the bench reads a window while it runs.
        append(&out, &std::mem::take(&mut lines));
    }
    let _ = service.cancel().await;
    Ok(())
}

fn append(path: &Path, text: &str) {
    use std::io::Write as _;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(text.as_bytes());
    }
}

/// A number in [0, 1) from the clock, enough to spread the callers.
fn rand_unit() -> f64 {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from((ns ^ std::process::id().wrapping_mul(2_654_435_761)) % 1_000_000) / 1e6
}

/// Starts `n` callers in new windows of `tmux`, against `socket`, writing
/// under `dir`.
fn start_callers(tmux: &TmuxServer, socket: &Path, n: usize, interval_ms: u64, dir: &Path) {
    let bench = bin_dir().join("clankie-bench");
    for i in 0..n {
        let line = format!(
            "exec {} fleet-caller {} {interval_ms} {} {}",
            bench.display(),
            socket.display(),
            dir.join(format!("caller-{i}.out")).display(),
            dir.join("stop").display(),
        );
        tmux.run(&["new-window", "-d", &line]);
    }
}

/// Every call the callers under `dir` logged: (unix ms, ok, latency).
fn calls(dir: &Path) -> Vec<(i64, bool, Duration)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for l in text.lines() {
            let mut f = l.split_whitespace();
            let (Some(at), Some(said), Some(us)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let (Ok(at), Ok(us)) = (at.parse::<i64>(), us.parse::<u64>()) else {
                continue;
            };
            all.push((at, said == "ok", Duration::from_micros(us)));
        }
    }
    all
}

/// What the callers under `dir` did in a `window` after `warmup`.
struct Phase {
    per_sec: f64,
    failed: usize,
    latencies: Vec<Duration>,
}

async fn measure(dir: &Path, warmup: Duration, window: Duration) -> Phase {
    tokio::time::sleep(warmup).await;
    let from = clankie_runtime::now_ms();
    tokio::time::sleep(window).await;
    let to = clankie_runtime::now_ms();
    let inside: Vec<_> = calls(dir)
        .into_iter()
        .filter(|(at, _, _)| *at >= from && *at < to)
        .collect();
    let ok: Vec<Duration> = inside.iter().filter(|c| c.1).map(|c| c.2).collect();
    Phase {
        per_sec: ok.len() as f64 / window.as_secs_f64(),
        failed: inside.len() - ok.len(),
        latencies: ok,
    }
}

/// Stops the callers under `dir` and waits for them to go.
async fn stop_callers(dir: &Path, tmux: &TmuxServer) {
    let _ = std::fs::write(dir.join("stop"), b"");
    tokio::time::sleep(Duration::from_secs(2)).await;
    tmux.kill();
}

fn relay_json(main: &Stack) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(main.state.path().join("run/fleet/gateway.json"))
            .unwrap_or_default(),
    )
    .unwrap_or(Value::Null)
}

fn links_up(main: &Stack) -> usize {
    let listed: Value =
        serde_json::from_str(&main.clankie_ok(&["fleet", "machine", "list", "--json"]))
            .unwrap_or(Value::Null);
    listed["machines"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["link"]["up"] == true).count())
        .unwrap_or(0)
}

/// One enrolled machine: its stack in namespace `ns`, linked to its tmux
/// session, enrolled as `name` with `main` reached at `main_at`.
async fn machine(
    main: &Stack,
    ns: &str,
    main_at: &str,
    name: &str,
) -> anyhow::Result<(Stack, TmuxServer)> {
    use std::io::Write as _;
    let secret = main
        .clankie_ok(&["fleet", "machine", "add", name])
        .trim()
        .to_string();
    let pin = relay_json(main)["relay"]["certSha256"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let options = || StackOptions {
        netns: Some(ns.to_string()),
        ..Default::default()
    };
    let mut stack = Stack::start_with(options()).await?;
    let tmux = TmuxServer::start("work");
    let socket = tmux.socket.display().to_string();
    stack.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    let mut enrol = std::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin_dir().join("clankie"))
        .args([
            "fleet", "machine", "enrol", name, "--main", main_at, "--pin", &pin,
        ])
        .env("CLANKIE_STATE", stack.state.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    if let Some(mut stdin) = enrol.stdin.take() {
        writeln!(stdin, "{secret}")?;
    }
    anyhow::ensure!(enrol.wait()?.success(), "{name} did not enrol");
    stack.restart(options()).await?;
    Ok((stack, tmux))
}

/// Waits until `n` links are up; how long it took.
async fn all_up(main: &Stack, n: usize, within: Duration) -> Option<Duration> {
    let began = Instant::now();
    while began.elapsed() < within {
        if links_up(main) >= n {
            return Some(began.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

fn main_rss_mib(main: &Stack) -> f64 {
    ["gateway", "admission"]
        .iter()
        .filter_map(|s| main.service_pid(s))
        .map(rss_kib)
        .sum::<f64>()
        / 1024.0
}

pub async fn bench_fleet(
    hosts: usize,
    seats: usize,
    interval_ms: u64,
    window: Duration,
) -> anyhow::Result<()> {
    println!(
        "fleet: 1 main stack, {hosts} machines (whole stacks, one network namespace each) x {seats} callers, one clankie_call every {interval_ms} ms each"
    );
    let star = NetStar::new(hosts);
    let port = clankie_tests::free_port();
    let main_options = || StackOptions {
        env: vec![("CLANKIE_RELAY_ADDR".into(), format!("0.0.0.0:{port}"))],
        netns: Some(star.main_ns.clone()),
        ..Default::default()
    };
    let mut main = Stack::start_with(main_options()).await?;
    main.connect_stdio("time", &["mcp-server-time"], &[]);
    let warmup = Duration::from_secs(5);

    // The single-host figure: as many callers, in the main stack's panes.
    let local = TmuxServer::start("work");
    let socket = local.socket.display().to_string();
    main.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    let local_dir = tempfile::tempdir()?;
    start_callers(
        &local,
        &main.state.path().join("run/fleet/mcp.sock"),
        hosts * seats,
        interval_ms,
        local_dir.path(),
    );
    let single = measure(local_dir.path(), warmup, window).await;
    stop_callers(local_dir.path(), &local).await;

    // The machines: memory before and after their links, no calls running.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = main_rss_mib(&main);
    let mut machines = Vec::new();
    for (i, ns) in star.remotes.iter().enumerate() {
        let at = format!("{}:{port}", star.main_addr_for(i));
        machines.push(machine(&main, ns, &at, &format!("m{i}")).await?);
    }
    all_up(&main, hosts, Duration::from_secs(60))
        .await
        .ok_or_else(|| anyhow::anyhow!("not every link came up"))?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = main_rss_mib(&main);

    let relay_dir = tempfile::tempdir()?;
    for (i, (stack, tmux)) in machines.iter().enumerate() {
        let dir = relay_dir.path().join(format!("m{i}"));
        std::fs::create_dir_all(&dir)?;
        start_callers(
            tmux,
            &stack.state.path().join("run/fleet/mcp.sock"),
            seats,
            interval_ms,
            &dir,
        );
    }
    let mut relayed = Phase {
        per_sec: 0.0,
        failed: 0,
        latencies: Vec::new(),
    };
    tokio::time::sleep(warmup).await;
    let from = clankie_runtime::now_ms();
    tokio::time::sleep(window).await;
    let to = clankie_runtime::now_ms();
    for i in 0..hosts {
        for (at, ok, took) in calls(&relay_dir.path().join(format!("m{i}"))) {
            if at >= from && at < to {
                if ok {
                    relayed.latencies.push(took);
                } else {
                    relayed.failed += 1;
                }
            }
        }
    }
    relayed.per_sec = relayed.latencies.len() as f64 / window.as_secs_f64();
    for i in 0..hosts {
        let _ = std::fs::write(relay_dir.path().join(format!("m{i}/stop")), b"");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The main stack restarts: how long until every link is back.
    main.restart(main_options()).await?;
    let back = all_up(&main, hosts, Duration::from_secs(120)).await;

    let (s, r) = (
        summarize(single.latencies.clone()),
        summarize(relayed.latencies.clone()),
    );
    println!(
        "  calls per second through the main stack  single-host {:>8.1}   relayed {:>8.1}   ratio x{:.2}",
        single.per_sec,
        relayed.per_sec,
        relayed.per_sec / single.per_sec.max(f64::MIN_POSITIVE)
    );
    println!(
        "  refused or failed in the window          single-host {:>8}   relayed {:>8}",
        single.failed, relayed.failed
    );
    line("call, single-host", &s);
    line("call, relayed", &r);
    println!(
        "  added by the relay                       p50 {:>9.1} µs   p99 {:>9.1} µs",
        crate::us(r.p50) - crate::us(s.p50),
        crate::us(r.p99) - crate::us(s.p99)
    );
    println!(
        "  main stack (gateway + admission) memory  {before:.1} MiB with no links, {after:.1} MiB with {hosts}: {:.2} MiB per link",
        (after - before) / hosts.max(1) as f64
    );
    match back {
        Some(d) => println!(
            "  every link up again after the main stack restarted: {:.2} s ({hosts} links)",
            d.as_secs_f64()
        ),
        None => println!("  not every link came back within 120 s of the main stack's restart"),
    }
    for (_, tmux) in &machines {
        tmux.kill();
    }
    drop(machines);
    drop(main);
    Ok(())
}
