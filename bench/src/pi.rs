//! The Pi worker benchmarks, each beside its baseline in the same run:
//!
//! - a lead's message until the Pi session holds it (the worker extension
//!   logs the moment Pi starts the message), beside the same delivery to
//!   this binary's stand-in seat (`seat` mode: the real bridge's channel);
//! - a `clankie_call` from inside Pi (sent → answered, as the extension
//!   logs them), beside the same call from the Python MCP SDK through the
//!   bridge in a pane of its own;
//! - the release probe's wall time.
//!
//! Everything is real: the stack, tmux panes, Pi 1.x on Node 22, the
//! scripted model (`tests/peers/model_server.py`) and `mcp-server-time`.

use std::path::Path;
use std::time::{Duration, Instant};

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::grpc::Meta;
use clankie_tests::{Stack, bin_dir, peers, python, repo_root};
use serde_json::Value;

use crate::{line, summarize, us};

use clankie_tests::pi::{NEWEST as PI, node};

pub(crate) fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The extension's log lines named `event`.
fn events(log: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == event)
        .collect()
}

pub(crate) async fn until<T>(
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return Ok(v);
        }
        anyhow::ensure!(Instant::now() < end, "timed out");
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// The lead's side of a benchmark: messages to hires on the mailbox's
/// socket, with the owner credential.
pub(crate) struct Lead {
    mailbox: clankie_runtime::clients::MailboxClient,
    pub(crate) conversation: String,
}

impl Lead {
    pub(crate) fn new(stack: &Stack, conversation: &str) -> anyhow::Result<Lead> {
        let token = std::fs::read_to_string(stack.state.path().join("owner.token"))?;
        Ok(Lead {
            mailbox: clankie_runtime::clients::mailbox(&stack.paths(), Meta::owner(token.trim())),
            conversation: conversation.to_string(),
        })
    }

    /// The lead's message to a hire; its delivery id.
    pub(crate) async fn send(&mut self, hire: &Value, text: String) -> anyhow::Result<String> {
        Ok(self
            .mailbox
            .message_seat(mailbox_pb::MessageSeatRequest {
                hire_id: hire["hireId"].as_str().unwrap_or("").into(),
                text,
                conversation_id: self.conversation.clone(),
            })
            .await?
            .into_inner()
            .delivery_id)
    }
}

/// The stand-in seat: this binary's seat mode under the real bridge, in a
/// pane; its hire and the file it notes each delivery's arrival in.
pub(crate) async fn standin(
    stack: &Stack,
    lead: &str,
    dir: &Path,
) -> anyhow::Result<(Value, std::path::PathBuf)> {
    let exe = std::env::current_exe()?.display().to_string();
    let seat_dir = dir.display().to_string();
    let seat_hire = hire(
        stack,
        lead,
        &[],
        &["--", &exe, "seat", &seat_dir, "standin"],
    )?;
    until(Duration::from_secs(60), || {
        std::fs::read_to_string(dir.join("standin.seat")).ok()
    })
    .await?;
    Ok((seat_hire, dir.join("standin.recv")))
}

/// One lead message to the stand-in seat, until its bridge handed it over.
pub(crate) async fn standin_delivery(
    lead: &mut Lead,
    seat: &Value,
    recv: &Path,
    i: usize,
) -> anyhow::Result<Duration> {
    let t0 = now_ns();
    let text = format!("standin {i}");
    lead.send(seat, text.clone()).await?;
    let at: u128 = until(Duration::from_secs(30), || {
        std::fs::read_to_string(recv).ok()?.lines().find_map(|l| {
            let (content, ns) = l.rsplit_once(' ')?;
            (content == text).then(|| ns.parse().ok()).flatten()
        })
    })
    .await?;
    Ok(Duration::from_nanos(at.saturating_sub(t0) as u64))
}

/// `rounds` of `clankie_call` from the Python MCP SDK through the bridge,
/// in a pane of their own.
pub(crate) async fn python_calls(
    stack: &Stack,
    lead: &str,
    dir: &Path,
    rounds: usize,
) -> anyhow::Result<Vec<Duration>> {
    let out = dir.join("python-calls.json");
    let py = python().display().to_string();
    let script = repo_root()
        .join("tests/clients/bench_calls.py")
        .display()
        .to_string();
    let clankie = bin_dir().join("clankie").display().to_string();
    let n = rounds.to_string();
    let out_s = out.display().to_string();
    hire(
        stack,
        lead,
        &[],
        &["--", &py, &script, &clankie, &n, &out_s],
    )?;
    until(Duration::from_secs(120), || {
        let v: Vec<f64> = serde_json::from_str(&std::fs::read_to_string(&out).ok()?).ok()?;
        Some(
            v.into_iter()
                .map(|u| Duration::from_secs_f64(u / 1e6))
                .collect(),
        )
    })
    .await
}

pub(crate) fn hire(
    stack: &Stack,
    lead: &str,
    extra_env: &[(&str, &Path)],
    args: &[&str],
) -> anyhow::Result<Value> {
    let mut all = vec!["hire", "--project", "bench", "--conversation", lead];
    all.extend_from_slice(args);
    let mut cmd = stack.clankie_cmd(&all);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "hire: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub async fn bench_pi(rounds: usize) -> anyhow::Result<()> {
    println!("== Pi worker: delivery and clankie_call beside the Python stand-ins; the probe ==");
    let stack = Stack::start().await?;
    let _tmux = stack.link_tmux("work");
    let workspace = tempfile::tempdir()?;
    stack.clankie_ok(&[
        "project",
        "add",
        "bench",
        "--workspace",
        &workspace.path().display().to_string(),
        "--worker-cap",
        "4",
    ]);
    let lead = stack.add_lead("Bench");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let dir = tempfile::tempdir()?;

    // The scripted model and a Pi profile that uses it.
    let model = clankie_tests::pi::Model::start(dir.path()).await;
    let agent = clankie_tests::pi::profile(dir.path(), &model);
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let log = dir.path().join("pi.log");
    let pi_bin = peers().join(format!("pi/{PI}/node_modules/.bin/pi"));
    let (pi_s, node_s) = (pi_bin.display().to_string(), node().display().to_string());
    let pi_hire = hire(
        &stack,
        &lead,
        &[
            ("PI_CODING_AGENT_DIR", &agent),
            ("HOME", &home),
            ("CLANKIE_PI_LOG", &log),
        ],
        &[
            "--harness",
            "pi",
            "--pi",
            &pi_s,
            "--node",
            &node_s,
            "--model",
            "scripted/scripted",
        ],
    )?;
    until(Duration::from_secs(90), || {
        events(&log, "tools.listed").into_iter().next()
    })
    .await?;
    let (seat_hire, recv) = standin(&stack, &lead, dir.path()).await?;
    let mut lead_side = Lead::new(&stack, &lead)?;

    // 1. A lead's message until the session holds it.
    let (mut to_pi, mut to_standin) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        let t0 = now_ns();
        let id = lead_side.send(&pi_hire, format!("SAY ok {i}")).await?;
        let taken = until(Duration::from_secs(30), || {
            events(&log, "delivery.taken")
                .into_iter()
                .find(|e| e["deliveryId"] == id.as_str())
        })
        .await?;
        let at_ns = (taken["at"].as_f64().unwrap_or(0.0) * 1e6) as u128;
        to_pi.push(Duration::from_nanos(at_ns.saturating_sub(t0) as u64));
        // The next brief goes once this run has settled.
        until(Duration::from_secs(30), || {
            events(&log, "delivery.settled")
                .into_iter()
                .find(|e| e["deliveryId"] == id.as_str())
        })
        .await?;
        to_standin.push(standin_delivery(&mut lead_side, &seat_hire, &recv, i).await?);
    }
    let (pi_d, standin_d) = (summarize(to_pi), summarize(to_standin));
    line("lead message → Pi session holds it", &pi_d);
    line("lead message → stand-in seat", &standin_d);
    println!(
        "  Pi / stand-in: p50 x{:.2}, p99 x{:.2}",
        us(pi_d.p50) / us(standin_d.p50).max(1.0),
        us(pi_d.p99) / us(standin_d.p99).max(1.0)
    );

    // 2. clankie_call from inside Pi, beside the Python SDK in a pane.
    let call =
        r#"CALL clankie_call {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}}"#;
    let brief = std::iter::repeat_n(call, rounds + 1)
        .collect::<Vec<_>>()
        .join("\n");
    let before = events(&log, "call.answered").len();
    lead_side.send(&pi_hire, brief).await?;
    until(Duration::from_secs(120), || {
        (events(&log, "call.answered").len() > before + rounds).then_some(())
    })
    .await?;
    let sent = events(&log, "call.sent");
    let answered = events(&log, "call.answered");
    let from_pi: Vec<Duration> = sent[before + 1..]
        .iter()
        .zip(&answered[before + 1..])
        .map(|(s, a)| {
            let ms = a["at"].as_f64().unwrap_or(0.0) - s["at"].as_f64().unwrap_or(0.0);
            Duration::from_secs_f64(ms.max(0.0) / 1e3)
        })
        .collect();
    let from_python = python_calls(&stack, &lead, dir.path(), rounds).await?;
    let (pi_c, py_c) = (summarize(from_pi), summarize(from_python));
    line("clankie_call from inside Pi", &pi_c);
    line("clankie_call from the Python SDK", &py_c);
    println!(
        "  Pi / Python SDK: p50 x{:.2}, p99 x{:.2}",
        us(pi_c.p50) / us(py_c.p50).max(1.0),
        us(pi_c.p99) / us(py_c.p99).max(1.0)
    );

    // 3. The probe's wall time.
    let mut walls = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        let verdict = stack.clankie_ok(&["pi", "probe", "--pi", &pi_s, "--node", &node_s]);
        walls.push(t0.elapsed());
        anyhow::ensure!(verdict.contains("\"ok\":true"), "probe failed: {verdict}");
    }
    let probe = summarize(walls);
    line("clankie pi probe (wall)", &probe);
    drop(model);
    Ok(())
}
