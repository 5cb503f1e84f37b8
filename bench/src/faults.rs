//! What faults and holding cost, beside their baselines.
//!
//! - Memory: the gateway's resident memory per parked MCP session and per
//!   idle keep-alive connection, each measured as the growth of one gateway
//!   process over N of them, in one run.
//! - Recovery: the time from `kill -9` of mcp-host to the first successful
//!   call through the gateway, beside a plain start of the same binary on
//!   the same accounts until it is ready (its catalog loaded).

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use clankie_runtime::grpc::Meta;
use clankie_runtime::paths::StatePaths;
use clankie_tests::{Stack, StackOptions, bin_dir, http_response, peer_path};
use serde_json::json;

use crate::{line, summarize};

/// Resident memory of a process, in KiB (from /proc/PID/status).
pub(crate) fn rss_kib(pid: i32) -> f64 {
    proc_kib(pid, "status", "VmRSS:")
}

/// A `KEY: N kB` line of `/proc/PID/FILE`, in KiB (0 when absent).
pub(crate) fn proc_kib(pid: i32, file: &str, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn open_session(url: &str, token: &str) -> anyhow::Result<()> {
    let auth = format!("Bearer {token}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}});
    let (status, _, body) = http_response(
        url,
        "POST",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", &auth),
        ],
        &init.to_string(),
    );
    anyhow::ensure!(status == 200, "initialize: {status} {body}");
    Ok(())
}

/// A keep-alive connection that asked once and then sits idle.
fn idle_connection(addr: &str) -> anyhow::Result<std::net::TcpStream> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf)?;
    anyhow::ensure!(buf[..n].starts_with(b"HTTP/1.1 200"), "healthz");
    Ok(s)
}

pub async fn bench_memory(n: usize) -> anyhow::Result<()> {
    println!("== gateway memory: per parked MCP session vs per idle connection ({n} each) ==");
    let stack = Stack::start_with(StackOptions {
        env: vec![
            ("CLANKIE_MAX_SESSIONS".into(), (4 * n).to_string()),
            (
                "CLANKIE_MAX_SESSIONS_PER_PRINCIPAL".into(),
                (4 * n).to_string(),
            ),
            ("CLANKIE_MAX_CONNECTIONS".into(), (4 * n).to_string()),
            (
                "CLANKIE_MAX_CONNECTIONS_PER_PEER".into(),
                (4 * n).to_string(),
            ),
        ],
        ..Default::default()
    })
    .await?;
    let token = stack.token("bench");
    let gateway = stack
        .service_pid("gateway")
        .ok_or_else(|| anyhow::anyhow!("no gateway"))?;
    let addr = stack.url.trim_start_matches("http://").to_string();
    // Warm the allocator and the paths once.
    for _ in 0..20 {
        open_session(&stack.mcp_url, &token)?;
        drop(idle_connection(&addr)?);
    }
    let base = rss_kib(gateway);
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(idle_connection(&addr)?);
    }
    let with_conns = rss_kib(gateway);
    for _ in 0..n {
        open_session(&stack.mcp_url, &token)?;
    }
    let with_sessions = rss_kib(gateway);
    let per_conn = (with_conns - base) / n as f64;
    let per_session = (with_sessions - with_conns) / n as f64;
    println!("  gateway resident: {base:.0} KiB at rest");
    println!("  per idle connection: {per_conn:.1} KiB");
    println!(
        "  per parked session:  {per_session:.1} KiB (x{:.1} an idle connection)",
        per_session / per_conn.max(1e-9)
    );
    println!(
        "  at the default caps (1,024 sessions, 1,024 connections a listener): at most {:.0} MiB of sessions, {:.0} MiB of connections",
        per_session * 1024.0 / 1024.0,
        per_conn * 1024.0 / 1024.0
    );
    drop(conns);
    Ok(())
}

pub async fn bench_recovery(rounds: usize) -> anyhow::Result<()> {
    println!(
        "== recovery: kill -9 of mcp-host to the first good call, vs a plain start of the binary =="
    );
    // A fresh stack per round: `clankie up` backs off a service that keeps
    // dying (250 ms, doubling, reset after 60 s up), and this measures the
    // first death, not the backoff.
    let mut recover = Vec::with_capacity(rounds);
    let mut plain = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let stack = Stack::start().await?;
        stack.connect_stdio("time", &["mcp-server-time"], &[]);
        let token = stack.token("bench");
        let client = stack.client(&token).await?;
        clankie_tests::wait_tool(&client, "time_get_current_time").await;
        let owner = std::fs::read_to_string(stack.state.path().join("owner.token"))?;

        // The fault: kill -9, then call until a call succeeds again.
        let t = Instant::now();
        stack.signal("mcp-host", nix::sys::signal::Signal::SIGKILL);
        loop {
            let ok = clankie_tests::utc_now(&client)
                .await
                .is_ok_and(|b| b["outcome"] == "ok");
            if ok {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            anyhow::ensure!(t.elapsed() < Duration::from_secs(60), "no recovery");
        }
        recover.push(t.elapsed());

        // The baseline: the same binary started plainly on a copy of the
        // accounts, until its readiness (catalog loaded) says serving.
        let dir = tempfile::Builder::new().prefix("ckb").tempdir_in("/tmp")?;
        let paths = StatePaths::new(dir.path().to_path_buf());
        std::fs::create_dir_all(dir.path().join("mcp-host"))?;
        std::fs::copy(
            stack.state.path().join("owner.token"),
            dir.path().join("owner.token"),
        )?;
        std::fs::copy(
            stack.state.path().join("mcp-host/accounts.json"),
            dir.path().join("mcp-host/accounts.json"),
        )?;
        let t = Instant::now();
        let mut child = tokio::process::Command::new(bin_dir().join("clankie-mcp-host"))
            .env("CLANKIE_STATE", dir.path())
            .env("PATH", peer_path())
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        loop {
            if clankie_runtime::clients::health(
                &clankie_runtime::Service::McpHost.socket(&paths),
                clankie_runtime::Service::McpHost.health_name(),
                Meta::owner(owner.trim()),
            )
            .await
            .unwrap_or(false)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            anyhow::ensure!(t.elapsed() < Duration::from_secs(60), "never ready");
        }
        plain.push(t.elapsed());
        let _ = child.kill().await;
    }
    let (r, p) = (summarize(recover), summarize(plain));
    line("plain start until ready", &p);
    line("kill -9 to first good call", &r);
    println!(
        "  recovery: x{:.2} a plain start (p50), x{:.2} (p99)",
        r.p50.as_secs_f64() / p.p50.as_secs_f64().max(1e-9),
        r.p99.as_secs_f64() / p.p99.as_secs_f64().max(1e-9)
    );
    Ok(())
}
