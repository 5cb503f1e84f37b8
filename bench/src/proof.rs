//! The local proof, measured the only way a pane reaches it: a client in a
//! pane of a linked tmux session asks the gateway, on its Unix socket and on
//! its loopback TCP listener, with 1,000 idle processes on the machine.
//!
//! Beside each proof, in the same client and the same loop: a new
//! connection that asks `/healthz` (no proof at all) and the same request
//! again on a proven connection (the cheap recheck). For TCP the baseline
//! is also one plain scan of every `/proc/*/fd` entry for the socket. The
//! issue's baseline, the bare kernel calls a Unix connection's proof starts
//! from (`SO_PEERCRED`, `SO_PEERPIDFD`, and `fstatfs` and `fstat` of the
//! pidfd), is measured here in the bench's own process, in the same run.

use std::time::{Duration, Instant};

use clankie_tests::{Stack, TmuxServer, peer_path, python, repo_root};
use serde_json::Value;

use crate::{Summary, cpu_seconds_all, line, summarize, us};

fn millis(v: &Value) -> Vec<Duration> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_f64)
                .map(|ms| Duration::from_secs_f64(ms / 1e3))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `local_http.py ARGS` as a new pane's process and waits for OUT.
async fn in_pane(stack: &Stack, tmux: &TmuxServer, args: &[String]) -> anyhow::Result<Value> {
    let out = args.get(2).cloned().unwrap_or_default();
    let command = format!(
        "exec env CLANKIE_STATE={} PATH={} {} {} {}",
        stack.state.path().display(),
        peer_path(),
        python().display(),
        repo_root().join("tests/clients/local_http.py").display(),
        args.join(" ")
    );
    tmux.run(&["split-window", "-t", "work", &command]);
    clankie_tests::wait_json(std::path::Path::new(&out), Duration::from_secs(600))
        .await
        .ok_or_else(|| anyhow::anyhow!("the pane's client did not finish"))
}

fn ratio(a: &Summary, b: &Summary) -> (f64, f64) {
    (
        us(a.p50) / us(b.p50).max(1e-9),
        us(a.p99) / us(b.p99).max(1e-9),
    )
}

/// The kernel calls that name a Unix connection's peer, on a connected
/// pair of this process's own.
fn bare_kernel_calls(rounds: usize) -> anyhow::Result<Summary> {
    use nix::sys::socket::{getsockopt, sockopt};
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bare.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path)?;
    let _client = std::os::unix::net::UnixStream::connect(&path)?;
    let (server, _) = listener.accept()?;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        let cred = getsockopt(&server, sockopt::PeerCredentials)?;
        let pidfd = getsockopt(&server, sockopt::PeerPidfd)?;
        let fs = nix::sys::statfs::fstatfs(&pidfd)?;
        let st = nix::sys::stat::fstat(&pidfd)?;
        times.push(t.elapsed());
        std::hint::black_box((cred.pid(), fs.filesystem_type(), st.st_ino));
    }
    Ok(summarize(times))
}

/// The floor under a map-answered proof or recheck: one census helper
/// exchange observing a lineage as long as a pane client's (this process
/// and its ancestors), through admission's own helper client.
async fn helper_observation(rounds: usize, identity_only: bool) -> anyhow::Result<Summary> {
    use clankie_proto::helper::v1 as helper_pb;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let helper = clankie_admission::helper::HelperClient::start(
        vec![
            clankie_tests::bin_dir()
                .join("clankie-helper")
                .display()
                .to_string(),
        ],
        shutdown.clone(),
    );
    let mut pids = vec![std::process::id() as i32];
    while pids.len() < 5 {
        let ppid = clankie_tests::ppid(*pids.last().unwrap_or(&1));
        if ppid <= 1 {
            break;
        }
        pids.push(ppid);
    }
    let job = || {
        helper_pb::request::Job::Observe(helper_pb::ObserveProcesses {
            pids: pids.clone(),
            with_ancestry: false,
            identity_only,
        })
    };
    helper
        .run(job())
        .await
        .map_err(|f| anyhow::anyhow!(f.reason()))?;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        helper
            .run(job())
            .await
            .map_err(|f| anyhow::anyhow!(f.reason()))?;
        times.push(t.elapsed());
    }
    shutdown.cancel();
    Ok(summarize(times))
}

/// Pane-host reads and pane-map hits so far, from `clankie fleet status`.
fn pane_counters(stack: &Stack) -> (u64, u64) {
    let status: Value =
        serde_json::from_str(&stack.clankie_ok(&["fleet", "status", "--json"])).unwrap_or_default();
    let n = |k: &str| status["localProofs"][k].as_u64().unwrap_or(0);
    (n("paneReads"), n("paneMapHits"))
}

async fn one_listener(
    stack: &Stack,
    tmux: &TmuxServer,
    rounds: usize,
    tcp: bool,
    kernel: &Summary,
) -> anyhow::Result<Summary> {
    let kind = if tcp { "loopback TCP" } else { "Unix socket" };
    let out = stack
        .state
        .path()
        .join(format!("proof-{kind}.json").replace(' ', "-"));
    let mut args = vec!["time".into(), rounds.to_string(), out.display().to_string()];
    if tcp {
        args.push("tcp".into());
    }
    let counted = pane_counters(stack);
    let seen = in_pane(stack, tmux, &args).await?;
    let (reads, hits) = pane_counters(stack);
    let (reads, hits) = (reads - counted.0, hits - counted.1);
    let (bare, full, again, kept) = (
        summarize(millis(&seen["bare"])),
        summarize(millis(&seen["full"])),
        summarize(millis(&seen["recheck"])),
        summarize(millis(&seen["kept"])),
    );
    println!("  -- {kind} --");
    line("connect + /healthz (no proof)", &bare);
    line("connect + full proof", &full);
    line("proven connection (recheck)", &again);
    line("proven connection, /healthz (no recheck)", &kept);
    // What the proof and the recheck add to their requests, by p50.
    let added = |a: &Summary, b: &Summary| us(a.p50) - us(b.p50);
    let (proof, recheck) = (added(&full, &bare), added(&again, &kept));
    let k = us(kernel.p50).max(1e-9);
    println!(
        "  added by the proof: {proof:.0} µs (x{:.0} the bare kernel calls); by the recheck: {recheck:.0} µs (x{:.0}) (p50 differences)",
        proof / k,
        recheck / k
    );
    let (p50, p99) = ratio(&full, &bare);
    let (r50, _) = ratio(&again, &full);
    println!("  full / no proof: p50 x{p50:.1}, p99 x{p99:.1}; recheck / full: p50 x{r50:.2}");
    println!(
        "  pane-host reads {reads}, pane-map hits {hits} over {rounds} proofs and {rounds} rechecks"
    );

    // Proofs per second and CPU per proof across every process involved
    // (the Python client's own work included).
    let n = rounds.min(300);
    let out = stack.state.path().join(format!("proofs-{tcp}.json"));
    let mut args = vec!["proofs".into(), n.to_string(), out.display().to_string()];
    if tcp {
        args.push("tcp".into());
    }
    let cpu_before = cpu_seconds_all();
    let t = Instant::now();
    in_pane(stack, tmux, &args).await?;
    let wall = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds_all() - cpu_before;
    println!(
        "  sequential: {:.0} proofs/s; {:.2} ms CPU per proof (machine-wide); the seed's helper: ~14 proofs/s at ~35 ms CPU each (x{:.0} less CPU)",
        n as f64 / wall,
        cpu * 1e3 / n as f64,
        35.0 / (cpu * 1e3 / n as f64).max(1e-9)
    );
    Ok(full)
}

pub async fn bench_proof(rounds: usize) -> anyhow::Result<()> {
    println!("== local proof through the gateway, from a pane, 1,000 extra idle processes ==");
    let stack = Stack::start().await?;
    let tmux = stack.link_tmux("work");
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(std::process::Command::new("sleep").arg("900").spawn()?);
    }
    let kernel = bare_kernel_calls(rounds.max(1000))?;
    line(
        "bare kernel calls (SO_PEERCRED, SO_PEERPIDFD, fstatfs, fstat)",
        &kernel,
    );
    let observed = helper_observation(rounds.max(1000), false).await?;
    line("one helper observation of 5 processes", &observed);
    let identities = helper_observation(rounds.max(1000), true).await?;
    line("the same, identities only (a recheck's)", &identities);
    println!(
        "  one helper observation / bare kernel calls: p50 x{:.0}; identities only x{:.0}",
        ratio(&observed, &kernel).0,
        ratio(&identities, &kernel).0
    );
    let unix = one_listener(&stack, &tmux, rounds, false, &kernel).await?;
    let (k50, k99) = ratio(&unix, &kernel);
    println!(
        "  Unix full proof (with its request) / bare kernel calls: p50 x{k50:.0}, p99 x{k99:.0}"
    );
    let tcp_rounds = rounds.min(200);
    let tcp = one_listener(&stack, &tmux, tcp_rounds, true, &kernel).await?;
    let (t50, _) = ratio(&tcp, &unix);
    println!("  TCP proof / Unix proof: p50 x{t50:.1}");

    // The TCP proof's floor: one plain pass over every /proc/*/fd entry for
    // a held loopback socket, with no retries, bounds or uid filter.
    let held = stack.state.path().join("held-tcp");
    tmux.run(&[
        "split-window",
        "-t",
        "work",
        &format!(
            "exec {} {} {} {}",
            python().display(),
            repo_root().join("tests/clients/hold_tcp.py").display(),
            stack.state.path().display(),
            held.display()
        ),
    ]);
    let mut ports = String::new();
    for _ in 0..300 {
        if let Ok(t) = std::fs::read_to_string(&held) {
            ports = t;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client_port: u32 = ports
        .split_once(' ')
        .and_then(|(c, _)| c.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("the pane's TCP client did not start"))?;
    let inode = crate::client_socket_inode(client_port)?;
    let mut scans = Vec::new();
    for _ in 0..tcp_rounds {
        let t = Instant::now();
        let holders = crate::plain_fd_scan(inode);
        scans.push(t.elapsed());
        anyhow::ensure!(holders == 1, "the plain scan found {holders} holders");
    }
    let scans = summarize(scans);
    line("plain /proc/*/fd scan (one pass)", &scans);
    let (s50, s99) = ratio(&tcp, &scans);
    println!("  TCP proof (with its request) / plain scan: p50 x{s50:.1}, p99 x{s99:.1}");
    loaded_tcp(&stack, &tmux, tcp_rounds.min(100)).await?;
    for mut c in idle {
        let _ = c.kill();
        let _ = c.wait();
    }
    Ok(())
}

/// TCP proofs of a member beside `stress-ng --cpu 2` (both cores busy):
/// each must still land within the seed's 600 ms job cap.
async fn loaded_tcp(stack: &Stack, tmux: &TmuxServer, rounds: usize) -> anyhow::Result<()> {
    let Ok(mut stress) = std::process::Command::new("stress-ng")
        .args(["--cpu", "2", "--timeout", "900", "--quiet"])
        .stdin(std::process::Stdio::null())
        .spawn()
    else {
        println!(
            "  (stress-ng is not installed: scripts/install-peers installs it; loaded run skipped)"
        );
        return Ok(());
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let out = stack.state.path().join("proof-loaded.json");
    let args = vec![
        "loaded".into(),
        rounds.to_string(),
        out.display().to_string(),
        "tcp".into(),
    ];
    let seen = in_pane(stack, tmux, &args).await;
    let _ = stress.kill();
    let _ = stress.wait();
    let seen = seen?;
    let full = millis(&seen["full"]);
    let over = full
        .iter()
        .filter(|d| **d > Duration::from_millis(600))
        .count();
    let refused: Vec<String> = seen["refused"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let admitted = full.len();
    let full = summarize(full);
    println!("  -- loopback TCP beside stress-ng --cpu 2 --");
    line("connect + full proof, loaded", &full);
    println!(
        "  {admitted} of {rounds} admitted, {over} over the 600 ms job cap; refused: {refused:?}"
    );
    Ok(())
}
