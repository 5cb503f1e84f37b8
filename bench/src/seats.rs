//! The mailbox benchmarks: peer message send → recipient bridge handoff,
//! beside a bare gRPC round trip on the mailbox's socket, and a catalog
//! change fanned out to 100 waiting bridges.
//!
//! Seats are real: hired panes of a linked tmux session, each running this
//! binary in `seat` mode as the harness of a real `clankie mcp --fleet`.

use parking_lot::Mutex;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_tests::{Stack, bin_dir};
use rmcp::model::{CallToolRequestParams, CustomNotification};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

use crate::{line, summarize, us};

const CHANNEL: &str = "notifications/claude/channel";

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn append(path: &Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, path)
}

struct SeatHandler {
    recv: PathBuf,
    changed: PathBuf,
    lock: Mutex<()>,
}

impl ClientHandler for SeatHandler {
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == CHANNEL {
            let content = notification
                .params
                .as_ref()
                .and_then(|p| p["content"].as_str())
                .unwrap_or("")
                .to_string();
            let _guard = self.lock.lock();
            append(&self.recv, &format!("{content} {}", now_ns()));
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        append(&self.changed, &now_ns().to_string());
    }
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// `clankie-bench seat DIR NAME`: a seat's harness inside a pane.
pub async fn seat_mode(dir: PathBuf, name: String, idle: bool) -> anyhow::Result<()> {
    let file = |s: &str| dir.join(format!("{name}.{s}"));
    let handler = SeatHandler {
        recv: file("recv"),
        changed: file("changed"),
        lock: Mutex::new(()),
    };
    let mut cmd = tokio::process::Command::new(bin_dir().join("clankie"));
    cmd.args(["mcp", "--fleet"]).env("RUST_LOG", "warn");
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let client = handler.serve(transport).await?;
    if idle {
        // Connected: the bench sees the seat reachable from the mailbox's
        // side, and this harness asks nothing more (a large answer, such
        // as a thousand seats listed, would stay in its gateway session's
        // stream cache and be counted as the stack's).
        write_atomic(&file("seat"), "")?;
        client.waiting().await?;
        return Ok(());
    }
    loop {
        let r = client
            .call_tool(CallToolRequestParams::new("list_fleet_seats"))
            .await?;
        let v = r.structured_content.unwrap_or(Value::Null);
        if v["self"]["reachable"] == true {
            write_atomic(&file("seat"), v["self"]["seatId"].as_str().unwrap_or(""))?;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop {
        if let Ok(text) = std::fs::read_to_string(file("send")) {
            let order: Value = serde_json::from_str(&text)?;
            let to = order["to"].as_str().unwrap_or("").to_string();
            let n = order["n"].as_u64().unwrap_or(0) as usize;
            let wait = PathBuf::from(order["wait"].as_str().unwrap_or(""));
            let pause = Duration::from_millis(order["pauseMs"].as_u64().unwrap_or(0));
            let first = order["first"].as_u64().unwrap_or(0) as usize;
            for i in first..first + n {
                tokio::time::sleep(pause).await;
                // The previous message settles when its delivery receipt
                // lands, just after the handoff; until then a send to the
                // same seat reads the original and sends nothing.
                loop {
                    let t0 = now_ns();
                    let r = client
                        .call_tool(CallToolRequestParams::new("message_peer").with_arguments(
                            args(json!({
                                "seat": to, "text": format!("{i} {t0}"), "receiptId": format!("b{i}")
                            })),
                        ))
                        .await?;
                    anyhow::ensure!(r.is_error != Some(true), "send {i} refused: {r:?}");
                    let v = r.structured_content.unwrap_or(Value::Null);
                    if v["original"] != true {
                        break;
                    }
                    tokio::time::sleep(Duration::from_micros(500)).await;
                }
                // The next message goes once this one was handed off.
                loop {
                    let lines = std::fs::read_to_string(&wait)
                        .map(|t| t.lines().count())
                        .unwrap_or(0);
                    if lines > i {
                        break;
                    }
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            }
            // The order goes first, so a new one written once `sent`
            // appears is never the one removed.
            std::fs::remove_file(file("send"))?;
            write_atomic(&file("sent"), "done")?;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) async fn wait_for(path: &Path, timeout: Duration) -> anyhow::Result<String> {
    let end = Instant::now() + timeout;
    loop {
        if let Ok(t) = std::fs::read_to_string(path) {
            return Ok(t);
        }
        anyhow::ensure!(
            Instant::now() < end,
            "timed out waiting for {}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Project `bench` (its workspace, which the caller keeps) with room for
/// `cap` workers, and a lead to hire them; returns the workspace and the
/// lead's conversation id.
pub(crate) fn bench_project(
    stack: &Stack,
    cap: usize,
) -> anyhow::Result<(tempfile::TempDir, String)> {
    let workspace = tempfile::tempdir()?;
    stack.clankie_ok(&[
        "project",
        "add",
        "bench",
        "--workspace",
        &workspace.path().display().to_string(),
        "--worker-cap",
        &cap.to_string(),
    ]);
    let lead: Value = serde_json::from_str(&stack.clankie_ok(&["lead", "add", "Bench"]))?;
    let lead = lead["conversationId"].as_str().unwrap_or("").to_string();
    Ok((workspace, lead))
}

pub(crate) fn hire(stack: &Stack, lead: &str, dir: &Path, name: &str) -> anyhow::Result<()> {
    hire_as(stack, lead, dir, name, "seat")
}

/// A seat whose harness only keeps its bridge: no orders, so nothing wakes
/// it (`seat-idle`).
pub(crate) fn hire_idle(stack: &Stack, lead: &str, dir: &Path, name: &str) -> anyhow::Result<()> {
    hire_as(stack, lead, dir, name, "seat-idle")
}

fn hire_as(stack: &Stack, lead: &str, dir: &Path, name: &str, mode: &str) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let out = stack.clankie(&[
        "hire",
        "--project",
        "bench",
        "--conversation",
        lead,
        "--",
        &exe.display().to_string(),
        mode,
        &dir.display().to_string(),
        name,
    ]);
    anyhow::ensure!(
        out.status.success(),
        "hire {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

pub async fn bench_seats(messages: usize, seats: usize) -> anyhow::Result<()> {
    println!(
        "== peer message send → recipient handoff vs a bare gRPC round trip; catalog fan-out =="
    );
    let stack = Stack::start().await?;
    let tmux = stack.link_tmux("work");
    let (_workspace, lead) = bench_project(&stack, seats + 2)?;
    let dir = tempfile::tempdir()?;
    hire(&stack, &lead, dir.path(), "a")?;
    hire(&stack, &lead, dir.path(), "b")?;
    wait_for(&dir.path().join("a.seat"), Duration::from_secs(60)).await?;
    let b_seat = wait_for(&dir.path().join("b.seat"), Duration::from_secs(60)).await?;

    // The baseline: a bare gRPC round trip on the mailbox's own socket.
    let token = std::fs::read_to_string(stack.state.path().join("owner.token"))?;
    let mut mailbox = clankie_runtime::clients::mailbox(
        &stack.paths(),
        clankie_runtime::grpc::Meta::owner(token.trim()),
    );
    let mut bare = Vec::with_capacity(messages);
    for _ in 0..messages {
        let t = Instant::now();
        mailbox
            .list_conversations(mailbox_pb::ListConversationsRequest {})
            .await?;
        bare.push(t.elapsed());
    }

    // What admission does for them: its counters before and after.
    let mut admission = clankie_runtime::clients::admission(
        &stack.paths(),
        clankie_runtime::grpc::Meta::owner(token.trim()),
    );
    let mut proof_stats = async || -> anyhow::Result<(u64, u64, u64)> {
        let s = admission
            .fleet_status(clankie_proto::admission::v1::FleetStatusRequest {})
            .await?
            .into_inner()
            .local_proofs
            .unwrap_or_default();
        Ok((s.proofs, s.reuses, s.helper_exchanges))
    };
    let before = proof_stats().await?;

    // Sequential peer messages from a to b, each handed to b's harness:
    // back to back (each sent once the previous one was handed off, racing
    // the recipient's acknowledgement and its next poll), then to an idle
    // recipient (a pause first, so its poll is parked when the send lands).
    let recv = dir.path().join("b.recv");
    let mut rounds = Vec::new();
    for (first, pause_ms) in [(0, 0u64), (messages, 30)] {
        let started = Instant::now();
        write_atomic(
            &dir.path().join("a.send"),
            &json!({ "to": b_seat.trim(), "n": messages, "wait": recv, "first": first, "pauseMs": pause_ms })
                .to_string(),
        )?;
        wait_for(&dir.path().join("a.sent"), Duration::from_secs(600)).await?;
        std::fs::remove_file(dir.path().join("a.sent"))?;
        let wall = started.elapsed();
        let mut lat = Vec::with_capacity(messages);
        for l in std::fs::read_to_string(&recv)?.lines().skip(first) {
            let f: Vec<&str> = l.split_whitespace().collect();
            if let [_, t0, t1] = f.as_slice() {
                let (t0, t1): (u128, u128) = (t0.parse()?, t1.parse()?);
                lat.push(Duration::from_nanos(t1.saturating_sub(t0) as u64));
            }
        }
        anyhow::ensure!(
            lat.len() == messages,
            "{} of {messages} handed off",
            lat.len()
        );
        rounds.push((pause_ms, wall, summarize(lat)));
    }
    let after = proof_stats().await?;
    let b = summarize(bare);
    line("bare gRPC round trip (mailbox.sock)", &b);
    for (pause_ms, wall, p) in &rounds {
        if *pause_ms == 0 {
            line("peer send → handoff, back to back", p);
            println!(
                "  handoff / bare: p50 x{:.0}, p99 x{:.0}; {:.0} messages/s sequential (each waits for its handoff)",
                us(p.p50) / us(b.p50).max(1e-9),
                us(p.p99) / us(b.p99).max(1e-9),
                messages as f64 / wall.as_secs_f64()
            );
        } else {
            line(
                &format!("peer send → handoff, idle ({pause_ms} ms apart)"),
                p,
            );
            println!(
                "  handoff / bare: p50 x{:.0}, p99 x{:.0}",
                us(p.p50) / us(b.p50).max(1e-9),
                us(p.p99) / us(b.p99).max(1e-9)
            );
        }
    }
    let per = |a: u64, b: u64| (a - b) as f64 / (2 * messages) as f64;
    println!(
        "  per message (both bridges' polls, claims and acks included): {:.1} full proofs, {:.1} rechecks, {:.1} census helper exchanges",
        per(after.0, before.0),
        per(after.1, before.1),
        per(after.2, before.2)
    );

    // Catalog change → every waiting bridge told (tools/list_changed).
    for i in 0..seats {
        hire(&stack, &lead, dir.path(), &format!("s{i}"))?;
    }
    for i in 0..seats {
        wait_for(
            &dir.path().join(format!("s{i}.seat")),
            Duration::from_secs(300),
        )
        .await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    stack.clankie_ok(&["fleet", "set", "--tools", "off"]);
    // From the commit: the settings file's last write, just before its
    // rename (not from starting the CLI process).
    let settings = stack.paths().service_dir("admission").join("settings.json");
    let t0 = std::fs::metadata(&settings)?
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos();
    let mut told = Vec::with_capacity(seats);
    for i in 0..seats {
        let path = dir.path().join(format!("s{i}.changed"));
        loop {
            let first_after = std::fs::read_to_string(&path)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse::<u128>().ok())
                .find(|t| *t >= t0);
            if let Some(t) = first_after {
                told.push(Duration::from_nanos((t - t0) as u64));
                break;
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(120),
                "seat s{i} was never told"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let last = told.iter().max().copied().unwrap_or_default();
    let first = told.iter().min().copied().unwrap_or_default();
    let late = told
        .iter()
        .filter(|t| **t > Duration::from_millis(400))
        .count();
    let t = summarize(told);
    line(&format!("catalog change → {seats} bridges told"), &t);
    println!(
        "  first of {seats} bridges told {:.1} ms and the last {:.1} ms after the change committed; {late} told after 400 ms",
        first.as_secs_f64() * 1e3,
        last.as_secs_f64() * 1e3
    );
    tmux.kill();
    Ok(())
}
