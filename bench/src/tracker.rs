//! The tracker benchmarks, each beside its baseline in the same run:
//!
//! - commit → `list_changes` wake with 50 waiting pollers, beside the
//!   committing write's own round trip;
//! - tracker writes per second through the host (receipts, the tracker
//!   hop, SQLite's synced commit), beside direct store writes;
//! - the budget check per call, beside an uncounted (lead) call's check;
//! - the vocabulary's schema size per role.
//!
//! The host calls use the owner's route on the real stack (owner calls are
//! not budgeted, so the throughput is the path's, not the budget's).

use std::sync::Arc;
use std::time::{Duration, Instant};

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::clients;
use clankie_runtime::grpc::{Client, Meta};
use clankie_tests::Stack;
use clankie_tracker::store::Store;
use clankie_tracker::tools::{self, Caller};
use clankie_types::vocabulary::Role;
use serde_json::{Value, json};

use crate::{line, summarize};

type Host = mcphost_pb::mcp_host_client::McpHostClient<Client>;

async fn host(stack: &Stack) -> anyhow::Result<Host> {
    let token = std::fs::read_to_string(stack.state.path().join("owner.token"))?;
    Ok(clients::mcp_host(&stack.paths(), Meta::owner(token.trim())))
}

async fn owner_call(host: &mut Host, tool: &str, args: Value) -> anyhow::Result<Value> {
    let r = host
        .call_tool(mcphost_pb::CallToolRequest {
            name: format!("linear_{tool}"),
            arguments_json: args.to_string(),
            receipt_id: String::new(),
            ..Default::default()
        })
        .await?
        .into_inner();
    anyhow::ensure!(
        clankie_types::fleet::Outcome::from_wire(r.outcome)
            == Some(clankie_types::fleet::Outcome::Ok),
        "{tool}: {:?} {}",
        clankie_types::fleet::Outcome::from_wire(r.outcome),
        r.result_json
    );
    let v: Value = serde_json::from_str(&r.result_json)?;
    Ok(v["structuredContent"].clone())
}

async fn wake_latency(stack: &Stack, rounds: usize, pollers: usize) -> anyhow::Result<()> {
    let mut h = host(stack).await?;
    owner_call(
        &mut h,
        "save_issue",
        json!({ "team": "BEN", "title": "seed" }),
    )
    .await?;
    let cursor = owner_call(&mut h, "list_changes", json!({})).await?["cursor"]
        .as_i64()
        .unwrap_or(0);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let waiting = Arc::new(tokio::sync::Semaphore::new(0));
    for _ in 0..pollers {
        let mut h = host(stack).await?;
        let tx = tx.clone();
        let waiting = waiting.clone();
        tokio::spawn(async move {
            let mut cursor = cursor;
            for round in 0..rounds {
                waiting.add_permits(1);
                let Ok(v) = owner_call(
                    &mut h,
                    "list_changes",
                    json!({ "cursor": cursor, "waitMs": 20000 }),
                )
                .await
                else {
                    return;
                };
                let _ = tx.send((round, Instant::now()));
                cursor = v["cursor"].as_i64().unwrap_or(cursor);
            }
        });
    }
    drop(tx);
    let mut wake = Vec::new();
    let mut write = Vec::new();
    for round in 0..rounds {
        // Every poller is inside its long poll.
        let permits = waiting.acquire_many(pollers as u32).await?;
        permits.forget();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let t0 = Instant::now();
        owner_call(
            &mut h,
            "save_issue",
            json!({ "team": "BEN", "title": format!("r{round}") }),
        )
        .await?;
        write.push(t0.elapsed());
        for _ in 0..pollers {
            let (r, at) = rx
                .recv()
                .await
                .ok_or_else(|| anyhow::anyhow!("a poller stopped"))?;
            anyhow::ensure!(r == round, "a poller woke for round {r}, not {round}");
            wake.push(at.duration_since(t0));
        }
    }
    println!(
        "tracker: commit → list_changes wake, {pollers} pollers, {rounds} commits (owner route, real stack)"
    );
    let w = summarize(write.clone());
    let k = summarize(wake.clone());
    line("the committing write's round trip", &w);
    line("each poller woken (from the write)", &k);
    println!(
        "  ratio wake/write                   p50 ×{:.2}   p99 ×{:.2}",
        k.p50.as_secs_f64() / w.p50.as_secs_f64(),
        k.p99.as_secs_f64() / w.p99.as_secs_f64()
    );
    Ok(())
}

async fn writes_per_second(stack: &Stack, seconds: u64, workers: usize) -> anyhow::Result<()> {
    // Through the host: receipts + the tracker hop + SQLite.
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for w in 0..workers {
        let mut h = host(stack).await?;
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                if owner_call(
                    &mut h,
                    "save_issue",
                    json!({ "team": "BEN", "title": format!("w{w}-{n}") }),
                )
                .await
                .is_ok()
                {
                    n += 1;
                }
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await?;
    }
    let hosted = total as f64 / seconds as f64;
    // The tracker service alone: the same write as the host sends it
    // (`Invoke` over gRPC with the owner credential), from 8 callers.
    let token = std::fs::read_to_string(stack.state.path().join("owner.token"))?;
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for w in 0..workers {
        let mut t = clients::tracker(&stack.paths(), Meta::owner(token.trim()));
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                let invoke = clankie_proto::tracker::v1::InvokeRequest {
                    tool: "save_issue".into(),
                    arguments_json: json!({ "team": "BEN", "title": format!("t{w}-{n}") })
                        .to_string(),
                    actor: "owner".into(),
                    role: clankie_proto::common::v1::Role::Owner as i32,
                    ..Default::default()
                };
                if t.invoke(invoke).await.is_ok() {
                    n += 1;
                }
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await?;
    }
    let tracker_alone = total as f64 / seconds as f64;
    // Direct: the same tool on the store in this process, one thread.
    let dir = tempfile::tempdir()?;
    let mut store = Store::open(&dir.path().join("tracker"))?;
    store.create_team("BEN", "Bench", "owner")?;
    let caller = Caller {
        actor: "owner".into(),
        role: Role::Owner,
    };
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut n = 0u64;
    while Instant::now() < end {
        tools::invoke(
            &mut store,
            &caller,
            "save_issue",
            json!({ "team": "BEN", "title": format!("d{n}") }),
        )?;
        n += 1;
    }
    let direct = n as f64 / seconds as f64;
    println!("tracker: save_issue writes per second");
    println!("  through the host ({workers} callers)      {hosted:>9.0} /s");
    println!("  tracker service alone ({workers} callers) {tracker_alone:>9.0} /s");
    println!("  direct store writes (1 thread)      {direct:>9.0} /s");
    println!(
        "  ratio host/direct                   ×{:.2}",
        hosted / direct
    );
    Ok(())
}

fn budget_check(iterations: u32) {
    use clankie_mcp_host::tracker::Budgets;
    use clankie_types::host::BudgetClass;
    let b = Budgets::default();
    // A worker with a busy window: refused after 600, so spread actors.
    let t = Instant::now();
    for i in 0..iterations {
        let actor = format!("hire:{}", i % 4096);
        let _ = b.admit(
            &actor,
            Role::Worker,
            BudgetClass::Interactive,
            i % 3 == 0,
            i64::from(i),
        );
    }
    let counted = t.elapsed() / iterations;
    let t = Instant::now();
    for i in 0..iterations {
        let actor = format!("lead:{}", i % 4096);
        let _ = b.admit(
            &actor,
            Role::Lead,
            BudgetClass::Interactive,
            i % 3 == 0,
            i64::from(i),
        );
    }
    let free = t.elapsed() / iterations;
    println!("tracker: budget check per call ({iterations} calls, 4,096 actors)");
    println!(
        "  counted (worker)                    {:>9.0} ns",
        counted.as_nanos()
    );
    println!(
        "  uncounted (lead, same call)         {:>9.0} ns",
        free.as_nanos()
    );
    println!(
        "  ratio                               ×{:.1}",
        counted.as_secs_f64() / free.as_secs_f64().max(1e-12)
    );
}

fn profiles() {
    println!("tracker: schema size each role sees (estimated tokens = bytes / 4)");
    for p in clankie_mcp_host::tracker::profiles() {
        println!(
            "  {:<8} {:>2} tools  {:>7} bytes  ~{:>6} tokens",
            clankie_types::Role::wire_word(p.role),
            p.tools,
            p.schema_bytes,
            p.estimated_tokens
        );
    }
}

pub async fn bench_tracker(rounds: usize, seconds: u64) -> anyhow::Result<()> {
    profiles();
    budget_check(1_000_000);
    let stack = Stack::start().await?;
    let out = stack.clankie(&["tracker", "team", "BEN", "--name", "Bench"]);
    anyhow::ensure!(out.status.success(), "team: {out:?}");
    wake_latency(&stack, rounds, 50).await?;
    writes_per_second(&stack, seconds, 8).await?;
    Ok(())
}
