//! Receipt history against the mcp-host's memory and restart: the same
//! binary started plainly on a state folder holding 1,000 receipts, and on
//! one holding 1,000,000 (each written through the real store, settled with
//! a small body, with the default retention), until its readiness says
//! serving; then its resident memory once the start-up history check is
//! done.

use std::path::Path;
use std::time::{Duration, Instant};

use clankie_mcp_host::receipts::{Outcome, ReceiptStore};
use clankie_runtime::grpc::Meta;
use clankie_runtime::paths::StatePaths;
use clankie_tests::{Stack, bin_dir, peer_path};
use serde_json::json;

use crate::{line, summarize};

/// Writes `n` settled receipts through the store, 2,000 in flight at once.
async fn fill(dir: &Path, n: usize) -> anyhow::Result<()> {
    let store = ReceiptStore::open(dir, clankie_mcp_host::DEFAULT_RETAINED_BODIES)?;
    let body = json!({"content": [{"type": "text", "text": "Echo: bench"}], "isError": false});
    let mut done = 0;
    while done < n {
        let batch = (n - done).min(2000);
        let mut tasks = Vec::with_capacity(batch);
        for i in 0..batch {
            let s = store.clone();
            let id = format!("history-{:08}", done + i);
            let body = body.clone();
            tasks.push(tokio::spawn(async move {
                s.begin(crate::record(id.clone())).await?;
                s.settle(&id, Outcome::Ok, Some(body), None)?;
                Ok::<(), clankie_runtime::ClankieError>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        done += batch;
    }
    store.sync().await?;
    Ok(())
}

/// One plain start: the time until ready, and resident KiB a second later.
async fn start(dir: &Path, owner: &str) -> anyhow::Result<(Duration, f64)> {
    let paths = StatePaths::new(dir.to_path_buf());
    let t = Instant::now();
    let mut child = tokio::process::Command::new(bin_dir().join("clankie-mcp-host"))
        .env("CLANKIE_STATE", dir)
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
            Meta::owner(owner),
        )
        .await
        .unwrap_or(false)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        anyhow::ensure!(t.elapsed() < Duration::from_secs(120), "never ready");
    }
    let ready = t.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss = crate::faults::rss_kib(child.id().unwrap_or(0) as i32);
    let _ = child.kill().await;
    let _ = child.wait().await;
    Ok((ready, rss))
}

pub async fn bench_history(large: usize, rounds: usize) -> anyhow::Result<()> {
    println!(
        "== receipt history: mcp-host restart and memory with 1,000 vs {large} retained receipts =="
    );
    // An owner credential from a real stack, so health answers.
    let stack = Stack::start().await?;
    let owner = std::fs::read_to_string(stack.state.path().join("owner.token"))?;
    let owner = owner.trim().to_string();
    let mut dirs = Vec::new();
    for n in [1_000, large] {
        let dir = tempfile::tempdir_in(clankie_tests::repo_root().join("target"))?;
        std::fs::copy(
            stack.state.path().join("owner.token"),
            dir.path().join("owner.token"),
        )?;
        let t = Instant::now();
        fill(&StatePaths::new(dir.path().to_path_buf()).receipts_dir(), n).await?;
        let on_disk: u64 = walk_bytes(dir.path());
        println!(
            "  wrote {n} receipts in {:.1} s ({:.0} MB on disk)",
            t.elapsed().as_secs_f64(),
            on_disk as f64 / 1e6
        );
        dirs.push(dir);
    }
    drop(stack);
    let (mut ready_small, mut ready_large) = (Vec::new(), Vec::new());
    let (mut rss_small, mut rss_large) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (t, r) = start(dirs[0].path(), &owner).await?;
        ready_small.push(t);
        rss_small.push(r);
        let (t, r) = start(dirs[1].path(), &owner).await?;
        ready_large.push(t);
        rss_large.push(r);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (a, b) = (summarize(ready_small), summarize(ready_large));
    line("start until ready, 1,000", &a);
    line(&format!("start until ready, {large}"), &b);
    let (ra, rb) = (median(rss_small), median(rss_large));
    println!("  resident after start: {ra:.0} KiB with 1,000, {rb:.0} KiB with {large}");
    println!(
        "  ratio {large}/1,000: restart p50 x{:.2}, resident x{:.2}",
        b.p50.as_secs_f64() / a.p50.as_secs_f64().max(1e-9),
        rb / ra.max(1.0)
    );
    Ok(())
}

fn walk_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => walk_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
