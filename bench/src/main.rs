//! `clankie-bench`: every benchmark beside its baseline, in one run, reported
//! as ratios (these machines are shared and noisy; absolute numbers drift,
//! ratios of interleaved runs do not).
//!
//!   clankie-bench call       clankie_call through gateway + mcp-host vs the
//!                            same server-everything tool called directly
//!   clankie-bench receipts   receipt cost with 1,000 vs 100,000 retained
//!   clankie-bench search     clankie_tools query over 10,000 tools / 50
//!                            accounts vs 100 tools / 2 accounts
//!   clankie-bench idle-seats 1,000 seats with parked polls on one stack:
//!                            memory, idle CPU, reconnect after a gateway
//!                            restart (CLANKIE_BENCH_SEATS sets how many)
//!   clankie-bench proof      local proof and its reuse recheck, from a pane
//!                            through the gateway, vs a request with no proof
//!   clankie-bench caller     the accept-time caller check of an internal
//!                            socket vs a bare gRPC round trip on it
//!   clankie-bench memory     gateway memory per parked session vs per idle
//!                            connection
//!   clankie-bench history    mcp-host restart and memory with 1,000,000
//!                            retained receipts vs 1,000
//!   clankie-bench recovery   kill -9 of mcp-host to the first good call vs
//!                            a plain start of the binary until ready
//!   clankie-bench grants     a direct grant tool call through the gateway vs
//!                            the same tool called directly; grant issue and
//!                            revoke vs a bare owner RPC
//!   clankie-bench sandbox    a hire's start (pane opened → first command
//!                            runs) under the worker sandbox vs without it
//!   clankie-bench harnesses  Claude Code and Codex: a lead message until the
//!                            session holds it, and clankie_call from inside,
//!                            beside the Python stand-ins
//!   clankie-bench observability  clankie_call with OTLP export on vs off;
//!                            GET /metrics vs /healthz, idle and with 1,000
//!                            MCP sessions open
//!   clankie-bench console    the web console in headless Chromium: first
//!                            page load vs the static sign-in page, and a
//!                            call's row drawn after its answer
//!   clankie-bench all        all of them
//!
//! Build with `cargo build --release --bins` (scripts/bench does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use clankie_mcp_host::catalog::{AccountTools, Catalog, Rules};
use clankie_mcp_host::receipts::{Outcome, ReceiptStore, Record, Status};
use clankie_tests::{Stack, call, peer_path, structured};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub(crate) struct Summary {
    p50: Duration,
    p99: Duration,
}

pub(crate) fn summarize(mut v: Vec<Duration>) -> Summary {
    v.sort();
    Summary {
        p50: percentile(&v, 0.50),
        p99: percentile(&v, 0.99),
    }
}

pub(crate) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub(crate) fn line(name: &str, s: &Summary) {
    println!(
        "  {name:<34} p50 {:>9.1} µs   p99 {:>9.1} µs",
        us(s.p50),
        us(s.p99)
    );
}

pub(crate) type Client = Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>>;

async fn direct_call(client: Client) -> anyhow::Result<()> {
    let mut p = CallToolRequestParams::new("echo");
    p.arguments = json!({"message": "bench"}).as_object().cloned();
    client.call_tool(p).await?;
    Ok(())
}

pub(crate) async fn bridge_call(client: Client) -> anyhow::Result<()> {
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "everything_echo", "arguments": {"message": "bench"}}),
    )
    .await?;
    anyhow::ensure!(
        structured(&r)["outcome"] == "ok",
        "bench call failed: {r:?}"
    );
    Ok(())
}

async fn bench_call(rounds: usize, seconds: u64) -> anyhow::Result<()> {
    println!("== clankie_call (gateway + mcp-host, receipts on) vs direct server-everything ==");
    let stack = Stack::start().await?;
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let token = stack.token("bench");
    let bridge = Arc::new(stack.client(&token).await?);

    let mut cmd = tokio::process::Command::new("mcp-server-everything");
    cmd.arg("stdio").env("PATH", peer_path());
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let direct = Arc::new(().serve(transport).await?);

    // Warm up both paths.
    for _ in 0..50 {
        direct_call(direct.clone()).await?;
        bridge_call(bridge.clone()).await?;
    }
    // Latency: strictly interleaved, one call at a time.
    let mut d = Vec::with_capacity(rounds);
    let mut b = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        direct_call(direct.clone()).await?;
        d.push(t.elapsed());
        let t = Instant::now();
        bridge_call(bridge.clone()).await?;
        b.push(t.elapsed());
    }
    let (ds, bs) = (summarize(d), summarize(b));
    line("direct echo", &ds);
    line("clankie_call everything_echo", &bs);
    println!(
        "  added latency: p50 +{:.1} µs (x{:.2}), p99 +{:.1} µs (x{:.2})",
        us(bs.p50) - us(ds.p50),
        us(bs.p50) / us(ds.p50).max(1e-9),
        us(bs.p99) - us(ds.p99),
        us(bs.p99) / us(ds.p99).max(1e-9)
    );

    // Throughput: 8 concurrent callers, alternating windows.
    let mut direct_rate = Vec::new();
    let mut bridge_rate = Vec::new();
    for _ in 0..2 {
        let d = direct.clone();
        direct_rate.push(throughput(seconds, 8, move || direct_call(d.clone())).await?);
        let b = bridge.clone();
        bridge_rate.push(throughput(seconds, 8, move || bridge_call(b.clone())).await?);
    }
    let dr = direct_rate.iter().sum::<f64>() / direct_rate.len() as f64;
    let br = bridge_rate.iter().sum::<f64>() / bridge_rate.len() as f64;
    println!(
        "  throughput (8 callers): direct {dr:.0} calls/s, bridge {br:.0} calls/s (x{:.2})",
        br / dr.max(1e-9)
    );
    // 64 callers over 8 harnesses: each harness is its own member with its
    // own session, as separate panes would be (one member may hold at most
    // 64 connections to the gateway).
    let mut bridges = Vec::with_capacity(8);
    for i in 0..8 {
        let token = stack.token(&format!("bench-{i}"));
        bridges.push(Arc::new(stack.client(&token).await?));
    }
    let d = direct.clone();
    let d64 = throughput(seconds, 64, move || direct_call(d.clone())).await?;
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let b64 = throughput(seconds, 64, move || {
        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bridge_call(bridges[i % bridges.len()].clone())
    })
    .await?;
    println!(
        "  throughput (64 callers over 8 sessions): direct {d64:.0} calls/s, bridge {b64:.0} calls/s (x{:.2})",
        b64 / d64.max(1e-9)
    );
    drop(stack);
    Ok(())
}

async fn throughput<F, Fut>(seconds: u64, workers: usize, f: F) -> anyhow::Result<f64>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let end = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                f().await?;
                n += 1;
            }
            Ok::<u64, anyhow::Error>(n)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

pub(crate) fn record(id: String) -> Record {
    Record {
        receipt_id: id,
        seq: 0,
        fleet: "bench".into(),
        principal: "fleet:bench:pane:unverified".into(),
        owner: String::new(),
        name: "everything_echo".into(),
        account: "everything".into(),
        account_generation: 1,
        arguments_sha256: "0".repeat(64),
        background: false,
        status: Status::Dispatched,
        outcome: None,
        result: None,
        detail: None,
        dispatched_at_ms: 0,
        settled_at_ms: None,
        trimmed: false,
        journal: String::new(),
    }
}

async fn fill(store: &ReceiptStore, n: usize) -> anyhow::Result<()> {
    let body = json!({"content": [{"type": "text", "text": "Echo: bench"}], "isError": false});
    let mut done = 0;
    while done < n {
        let batch = (n - done).min(2000);
        let mut tasks = Vec::with_capacity(batch);
        for i in 0..batch {
            let s = store.clone();
            let id = format!("fill-{}", done + i);
            let body = body.clone();
            tasks.push(tokio::spawn(async move {
                s.begin(record(id.clone())).await?;
                s.settle(&id, Outcome::Ok, Some(body), None)?;
                Ok::<(), clankie_runtime::ClankieError>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        done += batch;
    }
    Ok(())
}

async fn bench_receipts(calls: usize) -> anyhow::Result<()> {
    println!("== receipt cost: 1,000 vs 100,000 retained receipts (begin + settle, fsync'd) ==");
    let base = tempfile::tempdir_in(clankie_tests::repo_root().join("target"))?;
    let small = ReceiptStore::open(&base.path().join("small"), 10_000)?;
    let large = ReceiptStore::open(&base.path().join("large"), 10_000)?;
    let t = Instant::now();
    fill(&small, 1_000).await?;
    fill(&large, 100_000).await?;
    println!("  filled in {:.1} s", t.elapsed().as_secs_f64());
    let body = json!({"content": [{"type": "text", "text": "Echo: bench"}], "isError": false});
    let one = |store: ReceiptStore, id: String, body: serde_json::Value| async move {
        store.begin(record(id.clone())).await?;
        store.settle(&id, Outcome::Ok, Some(body), None)?;
        Ok::<(), clankie_runtime::ClankieError>(())
    };
    // The floors on this disk: one bare fdatasync of a small write, and one
    // small file written and fsync'd, renamed, then its directory fsync'd.
    let bare = {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(base.path().join("bare"))?;
        let page = [7u8; 512];
        let mut v = Vec::new();
        for _ in 0..calls {
            let t = Instant::now();
            f.write_at(&page, 0)?;
            f.sync_data()?;
            v.push(t.elapsed());
        }
        summarize(v)
    };
    line("baseline: pwrite + fdatasync", &bare);
    let mut floor = Vec::new();
    for i in 0..calls {
        let t = Instant::now();
        clankie_runtime::state::atomic_write(&base.path().join(format!("floor-{}", i % 4)), b"x")?;
        floor.push(t.elapsed());
    }
    line("baseline: one atomic_write", &summarize(floor));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (small0, large0) = (small.stats(), large.stats());
    for i in 0..calls {
        let t = Instant::now();
        one(small.clone(), format!("s-{i}"), body.clone()).await?;
        a.push(t.elapsed());
        let t = Instant::now();
        one(large.clone(), format!("l-{i}"), body.clone()).await?;
        b.push(t.elapsed());
    }
    let (sa, sb) = (summarize(a), summarize(b));
    line("1,000 retained (one caller)", &sa);
    line("100,000 retained (one caller)", &sb);
    println!(
        "  ratio 100k/1k: p50 x{:.2}, p99 x{:.2}; 1k vs bare fdatasync: p50 x{:.2}",
        us(sb.p50) / us(sa.p50).max(1e-9),
        us(sb.p99) / us(sa.p99).max(1e-9),
        us(sa.p50) / us(bare.p50).max(1e-9)
    );
    for (name, store, before) in [("1,000", &small, small0), ("100,000", &large, large0)] {
        let after = store.stats();
        let commits = (after.commits - before.commits).max(1) as f64;
        println!(
            "  {name:>7} retained: {:.2} syncs and {:.0} bytes written per commit, {:.2} commits per call, {} buckets in memory",
            (after.syncs - before.syncs) as f64 / commits,
            (after.bytes_written - before.bytes_written) as f64 / commits,
            commits / calls as f64,
            after.hot_buckets
        );
    }
    // Group commit: 512 concurrent callers share syncs.
    for (name, store) in [("1,000", &small), ("100,000", &large)] {
        let before = store.stats();
        let t = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..512 {
            tasks.push(tokio::spawn(one(
                store.clone(),
                format!("g-{name}-{i}"),
                body.clone(),
            )));
        }
        for task in tasks {
            task.await??;
        }
        let after = store.stats();
        println!(
            "  {name:>7} retained, 512 concurrent callers: {:.0} calls/s, {} commits for 1,024 changes",
            512.0 / t.elapsed().as_secs_f64(),
            after.commits - before.commits
        );
    }
    Ok(())
}

fn synthetic(accounts: usize, per: usize) -> Catalog {
    let verbs = [
        "get", "list", "create", "update", "delete", "search", "sync", "archive",
    ];
    let nouns = [
        "issue",
        "comment",
        "project",
        "user",
        "team",
        "label",
        "cycle",
        "document",
        "release",
        "milestone",
        "file",
        "branch",
        "build",
        "deploy",
        "invoice",
        "customer",
    ];
    let list: Vec<AccountTools> = (0..accounts)
        .map(|a| AccountTools {
            account: format!("acct{a:02}"),
            generation: 1,
            builtin: false,
            tools: (0..per)
                .map(|i| {
                    let v = verbs[i % verbs.len()];
                    let n = nouns[(i / verbs.len()) % nouns.len()];
                    let name = format!("{v}_{n}_{i}");
                    let desc = format!("{v} a {n} record number {i} in account {a}");
                    let schema =
                        json!({"type": "object", "properties": {"id": {"type": "string"}}});
                    (
                        name,
                        desc,
                        Arc::new(schema.as_object().cloned().unwrap_or_default()),
                    )
                })
                .collect(),
        })
        .collect();
    Catalog::build(&list, &Rules)
}

fn bench_search(queries: usize) {
    println!("== clankie_tools query: 10,000 tools / 50 accounts vs 100 tools / 2 accounts ==");
    let t = Instant::now();
    let big = synthetic(50, 200);
    println!(
        "  built 10,000-tool catalog in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let small = synthetic(2, 50);
    let qs = [
        "get issue",
        "list comments",
        "acct07 create project",
        "deploy",
        "archive invoice 42",
        "customer",
        "sync branch",
        "update label cycle",
        "nothing matches zzz",
        "release",
    ];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..queries {
        let q = qs[i % qs.len()];
        let t = Instant::now();
        let (hits, _) = small.search(q, 20);
        a.push(t.elapsed());
        std::hint::black_box(hits);
        let t = Instant::now();
        let (hits, _) = big.search(q, 20);
        b.push(t.elapsed());
        assert!(hits.len() <= 20);
        std::hint::black_box(hits);
    }
    let (sa, sb) = (summarize(a), summarize(b));
    line("100 tools", &sa);
    line("10,000 tools", &sb);
    println!(
        "  ratio 10k/100: p50 x{:.1}, p99 x{:.1}",
        us(sb.p50) / us(sa.p50).max(1e-9),
        us(sb.p99) / us(sa.p99).max(1e-9)
    );
}

/// The inode of the loopback TCP socket whose local port is `port`, from
/// /proc/net/tcp.
pub(crate) fn client_socket_inode(port: u32) -> anyhow::Result<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp")?;
    let want = format!(":{port:04X}");
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() > 9 && f[1].ends_with(&want) {
            return Ok(f[9].parse()?);
        }
    }
    anyhow::bail!("no socket with local port {port}")
}

/// The baseline: one pass over every /proc/*/fd entry, counting holders of
/// `inode`, with no retries, bounds or uid filter.
pub(crate) fn plain_fd_scan(inode: u64) -> usize {
    let target = format!("socket:[{inode}]");
    let mut holders = 0;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for p in procs.flatten() {
        if !p
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str()))
        {
            holders += 1;
        }
    }
    holders
}

/// CPU seconds used by the whole machine so far (user + system, all cores).
pub(crate) fn cpu_seconds_all() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: u64 = stat
        .lines()
        .next()
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .take(3)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    ticks as f64 / 100.0
}

mod auto;
mod caller;
mod console;
mod faults;
mod fleet;
mod grants;
mod harnesses;
mod history;
mod idle_seats;
mod observability;
mod pi;
mod proof;
mod sandbox;
mod seats;
mod tracker;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    // Inside a hired pane: the harness of one seat.
    if what == "seat" || what == "seat-idle" {
        let mut rest = std::env::args().skip(2);
        let (Some(dir), Some(name)) = (rest.next(), rest.next()) else {
            anyhow::bail!("usage: clankie-bench seat DIR NAME");
        };
        return seats::seat_mode(dir.into(), name, what == "seat-idle").await;
    }
    // Inside a machine's pane: one caller of the fleet benchmark.
    if what == "fleet-caller" {
        let rest: Vec<String> = std::env::args().skip(2).collect();
        return fleet::caller_mode(&rest).await;
    }
    let quick = std::env::var("CLANKIE_BENCH_QUICK").is_ok();
    let (rounds, secs, receipts, queries) = if quick {
        (100, 1, 100, 2_000)
    } else {
        (1_000, 5, 500, 20_000)
    };
    match what.as_str() {
        "call" => bench_call(rounds, secs).await?,
        "receipts" => bench_receipts(receipts).await?,
        "search" => bench_search(queries),
        "proof" => proof::bench_proof(rounds.min(500)).await?,
        "caller" => caller::bench_caller(rounds).await?,
        "seats" => seats::bench_seats(rounds.min(500), if quick { 20 } else { 100 }).await?,
        "tracker" => tracker::bench_tracker(if quick { 10 } else { 50 }, secs).await?,
        "idle-seats" => {
            idle_seats::bench_idle_seats(
                std::env::var("CLANKIE_BENCH_SEATS")
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(if quick { 100 } else { 1000 }),
            )
            .await?
        }
        "auto" => auto::bench_auto(if quick { 3 } else { 10 }).await?,
        "memory" => faults::bench_memory(if quick { 100 } else { 500 }).await?,
        "history" => {
            history::bench_history(
                if quick { 100_000 } else { 1_000_000 },
                if quick { 3 } else { 7 },
            )
            .await?
        }
        "recovery" => faults::bench_recovery(if quick { 2 } else { 5 }).await?,
        "grants" => grants::bench_grants(rounds.min(500)).await?,
        "pi" => pi::bench_pi(if quick { 10 } else { 30 }).await?,
        "sandbox" => sandbox::bench_sandbox(if quick { 5 } else { 30 }).await?,
        "harnesses" => harnesses::bench_harnesses(if quick { 5 } else { 20 }).await?,
        "observability" => {
            observability::bench_observability(rounds.min(500), if quick { 100 } else { 1_000 })
                .await?
        }
        "console" => console::bench_console(if quick { 20 } else { 100 }).await?,
        // Root only (network namespaces), and heavy: not part of `all`.
        "fleet" => {
            let env = |k: &str, d: u64| {
                std::env::var(k)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(d)
            };
            fleet::bench_fleet(
                env("CLANKIE_BENCH_HOSTS", if quick { 3 } else { 20 }) as usize,
                env("CLANKIE_BENCH_SEATS_PER_HOST", if quick { 5 } else { 50 }) as usize,
                env("CLANKIE_BENCH_INTERVAL_MS", 5_000),
                Duration::from_secs(env("CLANKIE_BENCH_WINDOW_S", if quick { 10 } else { 20 })),
            )
            .await?
        }
        "all" => {
            bench_search(queries);
            bench_receipts(receipts).await?;
            bench_call(rounds, secs).await?;
            proof::bench_proof(rounds.min(500)).await?;
            caller::bench_caller(rounds).await?;
            seats::bench_seats(rounds.min(500), if quick { 20 } else { 100 }).await?;
            tracker::bench_tracker(if quick { 10 } else { 50 }, secs).await?;
            auto::bench_auto(if quick { 3 } else { 10 }).await?;
            faults::bench_memory(if quick { 100 } else { 500 }).await?;
            history::bench_history(
                if quick { 100_000 } else { 1_000_000 },
                if quick { 3 } else { 7 },
            )
            .await?;
            faults::bench_recovery(if quick { 2 } else { 5 }).await?;
            grants::bench_grants(rounds.min(500)).await?;
            pi::bench_pi(if quick { 10 } else { 30 }).await?;
            sandbox::bench_sandbox(if quick { 5 } else { 30 }).await?;
            harnesses::bench_harnesses(if quick { 5 } else { 20 }).await?;
            observability::bench_observability(rounds.min(500), if quick { 100 } else { 1_000 })
                .await?;
            console::bench_console(if quick { 20 } else { 100 }).await?;
        }
        other => {
            anyhow::bail!(
                "unknown benchmark {other}: call, receipts, search, proof, caller, seats, tracker, auto, memory, history, recovery, grants, pi, sandbox, harnesses, observability, console, fleet or all"
            )
        }
    }
    Ok(())
}
