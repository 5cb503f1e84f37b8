//! Claude Code and Codex as fleet workers, each beside the Python stand-ins
//! in the same run:
//!
//! - a lead's message until the session holds it: until the harness sends
//!   its model the request that carries it (the scripted model logs when
//!   each request came), beside the same delivery to this binary's stand-in
//!   seat (`seat` mode: the real bridge's channel);
//! - a `clankie_call` from inside the harness: from the model's answer that
//!   asks for the call to the harness's next request, which carries its
//!   result (the harness's own step around the call), beside the same call
//!   from the Python MCP SDK through the bridge in a pane of its own.
//!
//! Everything is real: the stack, tmux panes, Claude Code 2.1.332, Codex
//! 0.169.0, the scripted model and `mcp-server-time`.

use std::path::Path;

use anyhow::Context as _;
use std::time::Duration;

use clankie_tests::Stack;
use clankie_tests::model::Model;
use serde_json::Value;

use crate::pi::{Lead, hire, now_ns, python_calls, standin, standin_delivery, until};
use crate::{line, summarize, us};

/// The model's requests, newest last.
fn requests(model: &Model) -> Vec<Value> {
    model.requests()
}

/// When the model first received a request whose newest message holds
/// `marker`, in ns since the epoch.
fn received(model: &Model, marker: &str) -> Option<u128> {
    requests(model)
        .into_iter()
        .filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .find(|r| r["last"].as_str().is_some_and(|l| l.contains(marker)))
        .and_then(|r| r["at"].as_f64())
        .map(|at| (at * 1e9) as u128)
}

struct Harness {
    name: &'static str,
    hire: Value,
}

/// Waits until the harness's pane shows the model's answer `text` (Claude
/// Code marks an answer `●`, Codex `•`): its turn has ended.
async fn answered(
    tmux: &clankie_tests::TmuxServer,
    hire: &Value,
    text: &str,
) -> anyhow::Result<()> {
    let pane = hire["paneId"].as_str().unwrap_or("");
    until(Duration::from_secs(60), || {
        let screen = tmux.run(&["capture-pane", "-p", "-t", pane]);
        (screen.contains(&format!("● {text}")) || screen.contains(&format!("• {text}")))
            .then_some(())
    })
    .await
}

async fn hire_claude(
    stack: &Stack,
    lead: &str,
    dir: &Path,
    model: &Model,
) -> anyhow::Result<Value> {
    let profile = dir.join("claude-profile");
    std::fs::create_dir_all(&profile)?;
    let bin = clankie_tests::claude::claude_bin().display().to_string();
    let mut all = vec!["hire", "--project", "bench", "--conversation", lead];
    let p = profile.display().to_string();
    all.extend(["--harness", "claude", "--claude", &bin, "--profile", &p]);
    let mut cmd = stack.clankie_cmd(&all);
    cmd.envs(clankie_tests::claude::provider_env(model));
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "hire claude: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn hire_codex(stack: &Stack, lead: &str, dir: &Path, model: &Model) -> anyhow::Result<Value> {
    let profile = dir.join("codex-profile");
    std::fs::create_dir_all(&profile)?;
    std::fs::write(
        profile.join("config.toml"),
        clankie_tests::codex::provider_config(model),
    )?;
    let bin = clankie_tests::codex::codex_bin().display().to_string();
    let p = profile.display().to_string();
    hire(
        stack,
        lead,
        &[],
        &[
            "--harness",
            "codex",
            "--codex",
            &bin,
            "--profile",
            &p,
            "--",
            "SAY codex up",
        ],
    )
}

pub async fn bench_harnesses(rounds: usize) -> anyhow::Result<()> {
    println!(
        "== Claude Code and Codex workers: delivery and clankie_call beside the Python stand-ins =="
    );
    let stack = Stack::start().await?;
    let tmux = stack.link_tmux("work");
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
    let model = Model::start(dir.path()).await;
    let mut lead_side = Lead::new(&stack, &lead)?;
    let (seat, recv) = standin(&stack, &lead, dir.path()).await?;
    let harnesses = [
        Harness {
            name: "Claude Code",
            hire: hire_claude(&stack, &lead, dir.path(), &model).await?,
        },
        Harness {
            name: "Codex",
            hire: hire_codex(&stack, &lead, dir.path(), &model)?,
        },
    ];
    // Each harness is up once a first message reached its model.
    for h in &harnesses {
        let warm = format!("{} warm", h.name);
        lead_side.send(&h.hire, format!("SAY {warm}")).await?;
        until(Duration::from_secs(90), || received(&model, &warm))
            .await
            .map_err(|e| {
                let pane = h.hire["paneId"].as_str().unwrap_or("");
                anyhow::anyhow!(
                    "{} never took its first message: {e}\n{}",
                    h.name,
                    tmux.run(&["capture-pane", "-p", "-t", pane])
                )
            })?;
        answered(&tmux, &h.hire, &warm)
            .await
            .map_err(|e| anyhow::anyhow!("{}'s first turn never ended: {e}", h.name))?;
    }
    let from_python = summarize(
        python_calls(&stack, &lead, dir.path(), rounds)
            .await
            .context("the Python SDK's calls")?,
    );
    let mut standin_times = Vec::new();
    for h in &harnesses {
        // 1. A lead's message until the harness sends it to its model.
        let mut held = Vec::new();
        for i in 0..rounds {
            let marker = format!("{} ok {i}", h.name);
            let t0 = now_ns();
            lead_side.send(&h.hire, format!("SAY {marker}")).await?;
            let at = until(Duration::from_secs(60), || received(&model, &marker))
                .await
                .with_context(|| format!("{marker} never reached the model"))?;
            held.push(Duration::from_nanos(at.saturating_sub(t0) as u64));
            // The turn ends before the next message, so no delivery waits
            // on a running turn.
            answered(&tmux, &h.hire, &marker)
                .await
                .with_context(|| format!("the turn of {marker} never ended"))?;
            standin_times
                .push(standin_delivery(&mut lead_side, &seat, &recv, standin_times.len()).await?);
        }
        // 2. clankie_call from inside the harness.
        let call = r#"CALL clankie_call {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}}"#;
        let tag = format!("{} calls", h.name);
        let script = std::iter::repeat_n(call.to_string(), rounds)
            .chain(std::iter::once(format!("SAY {tag}")))
            .collect::<Vec<_>>()
            .join("\n");
        let before = requests(&model).len();
        lead_side.send(&h.hire, script).await?;
        until(Duration::from_secs(180), || {
            let seen = requests(&model)[before..]
                .iter()
                .filter(|r| Model::after_tool(r))
                .count();
            (seen >= rounds).then_some(())
        })
        .await
        .with_context(|| format!("{}'s calls never all came back", h.name))?;
        let turn: Vec<f64> = requests(&model)[before..]
            .iter()
            .filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .filter_map(|r| r["at"].as_f64())
            .collect();
        let calls: Vec<Duration> = turn
            .windows(2)
            .map(|w| Duration::from_secs_f64((w[1] - w[0]).max(0.0)))
            .take(rounds)
            .collect();
        let (held, calls) = (summarize(held), summarize(calls));
        line(&format!("lead message → {} holds it", h.name), &held);
        line(&format!("clankie_call from inside {}", h.name), &calls);
        println!(
            "  {} call / Python SDK call: p50 x{:.2}, p99 x{:.2}",
            h.name,
            us(calls.p50) / us(from_python.p50).max(1.0),
            us(calls.p99) / us(from_python.p99).max(1.0)
        );
        answered(&tmux, &h.hire, &tag)
            .await
            .with_context(|| format!("{tag} never ended"))?;
        let standin_d = summarize(standin_times.clone());
        println!(
            "  {} delivery / stand-in delivery: p50 x{:.2}, p99 x{:.2}",
            h.name,
            us(held.p50) / us(standin_d.p50).max(1.0),
            us(held.p99) / us(standin_d.p99).max(1.0)
        );
    }
    line("lead message → stand-in seat", &summarize(standin_times));
    line("clankie_call from the Python SDK", &from_python);
    // Closing stops what Codex left running for its hire's home.
    for h in &harnesses {
        let id = h.hire["hireId"].as_str().unwrap_or("");
        stack.clankie_ok(&["close", id, "--conversation", &lead]);
    }
    drop(model);
    Ok(())
}
