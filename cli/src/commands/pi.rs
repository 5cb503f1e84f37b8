//! `clankie pi probe`: whether the installed Pi does what the worker
//! extension relies on. A release older than the oldest accepted one is
//! refused without running anything; any other runs `probe.mjs` with the
//! selected Node against the installed package and prints its one JSON
//! line. Every Pi hire runs it first.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::support::pi::{self, PiPackage};

#[derive(Subcommand)]
pub enum PiCommand {
    /// Probe the installed Pi release; prints one JSON line.
    Probe(ProbeArgs),
}

#[derive(Args)]
pub struct ProbeArgs {
    /// Pi's executable or package folder (default: `pi` on PATH).
    #[arg(long)]
    pub pi: Option<PathBuf>,
    /// The Node to run the probe with (default: `node` on PATH; Node 22).
    #[arg(long)]
    pub node: Option<PathBuf>,
}

pub async fn run(command: PiCommand) -> anyhow::Result<ExitCode> {
    match command {
        PiCommand::Probe(args) => {
            let verdict = probe(args.pi.as_deref(), args.node.as_deref()).await;
            println!("{verdict}");
            Ok(if verdict["ok"] == true {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// `clankie accounts --workers`: each worker harness and whether it can
/// be hired now (Pi: its release probe).
pub async fn workers(
    pi_path: Option<&Path>,
    node: Option<&Path>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let verdict = probe(pi_path, node).await;
    let hireable = verdict["ok"] == true;
    if json {
        crate::support::output::print_json(&json!({
            "workers": [{ "harness": "pi", "hireable": hireable, "probe": verdict }]
        }));
        return Ok(ExitCode::SUCCESS);
    }
    let word = |k: &str| verdict[k].as_str().map(str::to_string);
    let release = word("release").unwrap_or_else(|| "-".into());
    if hireable {
        println!(
            "pi  hireable  release {release}  probed in {} ms",
            verdict["ms"]
        );
    } else {
        println!(
            "pi  not hireable  release {release}  {} failed: {}",
            word("surface").unwrap_or_default(),
            crate::support::output::field(&word("error").unwrap_or_default())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The probe's verdict: `{ok: true, release, surfaces, ms}`, or
/// `{ok: false, release, surface, error}` naming the first surface that
/// failed (`release` for one refused without probing).
pub async fn probe(pi_path: Option<&Path>, node: Option<&Path>) -> Value {
    match run_probe(pi_path, node).await {
        Ok(v) => v,
        Err(e) => {
            json!({ "ok": false, "release": null, "surface": "setup", "error": format!("{e:#}") })
        }
    }
}

async fn run_probe(pi_path: Option<&Path>, node: Option<&Path>) -> anyhow::Result<Value> {
    let package = PiPackage::find(pi_path)?;
    if let Err(why) = package.accepted() {
        return Ok(
            json!({ "ok": false, "release": package.version, "surface": "release", "error": why }),
        );
    }
    let node = pi::node(node)?;
    let script = pi::worker_dir()?.join("probe.mjs");
    let run = tokio::process::Command::new(&node)
        .arg(&script)
        .arg("--pi")
        .arg(&package.dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    // The probe bounds each surface itself; this is the backstop.
    let out = tokio::time::timeout(std::time::Duration::from_secs(180), run)
        .await
        .context("the probe did not finish in 180 s")?
        .with_context(|| format!("could not run {}", node.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Ok(serde_json::from_str(line).unwrap_or_else(|_| {
        json!({
            "ok": false,
            "release": package.version,
            "surface": "probe",
            "error": format!(
                "the probe printed no verdict (exit {:?}): {}",
                out.status.code(),
                clankie_runtime::limits::clip(&String::from_utf8_lossy(&out.stderr), 400)
            ),
        })
    }))
}
