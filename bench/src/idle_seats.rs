//! Many seats on one stack: N hired panes, each a real `clankie mcp
//! --fleet` under a harness, every bridge with its seat poll parked.
//!
//! Measured beside the same stack with no seats, in the same run:
//! - the stack's resident memory (every service process and the census
//!   helper), in total and per seat;
//! - the stack's CPU while the seats sit idle, as a share of one core;
//! - the bridges' and harnesses' own memory (the hires' side, reported
//!   apart: it is not the stack's);
//! - how long after a `kill -9` of the gateway every bridge is proven
//!   again (admission's count of full proofs), and what was refused on
//!   the way.

use std::path::Path;
use std::time::{Duration, Instant};

use clankie_tests::{Stack, bin_dir};

use crate::faults::rss_kib;

const SERVICES: [&str; 6] = [
    "gateway",
    "admission",
    "mailbox",
    "mcp-host",
    "tracker",
    "auto",
];

/// The stack's processes now: its services and the census helper.
fn stack_pids(stack: &Stack) -> Vec<i32> {
    let mut pids: Vec<i32> = SERVICES
        .iter()
        .filter_map(|s| stack.service_pid(s))
        .collect();
    if let Some(admission) = stack.service_pid("admission") {
        pids.extend(Stack::children_matching(admission, "clankie-helper"));
    }
    pids
}

/// User + system CPU of a process so far, in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15.
    let at = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    at(14) + at(15)
}

/// The stack's share of one core over `window`, in percent, in total and
/// per process (the helper last), and the linked tmux server's apart.
async fn idle_cpu(stack: &Stack, tmux: i32, window: Duration) -> (f64, Vec<f64>, f64) {
    let pids = stack_pids(stack);
    let before: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p)).collect();
    let tmux_before = cpu_ticks(tmux);
    tokio::time::sleep(window).await;
    let after: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p)).collect();
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let share = |t: u64| t as f64 / ticks / window.as_secs_f64() * 100.0;
    let each: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| share(a.saturating_sub(*b)))
        .collect();
    let tmux_share = share(cpu_ticks(tmux).saturating_sub(tmux_before));
    (each.iter().sum(), each, tmux_share)
}

/// The pid of the tmux server behind a socket.
fn tmux_server(socket: &Path) -> i32 {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(["display-message", "-p", "#{pid}"])
        .output();
    out.ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0)
}

fn stack_rss_mib(stack: &Stack) -> f64 {
    stack_pids(stack).iter().map(|p| rss_kib(*p)).sum::<f64>() / 1024.0
}

/// Each stack process's resident memory, in MiB, named.
fn rss_by_process(stack: &Stack) -> String {
    let names = SERVICES.iter().chain(&["helper"]);
    names
        .zip(stack_pids(stack))
        .map(|(n, p)| format!("{n} {:.1}", rss_kib(p) / 1024.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Proportional memory of a process, in KiB: its private pages, and its
/// share of pages it maps with others (a binary's text, counted once
/// across all its copies).
fn pss_kib(pid: i32) -> f64 {
    crate::faults::proc_kib(pid, "smaps_rollup", "Pss:")
}

/// Proportional memory of every process whose executable is `exe` and
/// whose arguments include `arg`, in MiB, and how many there are.
fn pss_of(exe: &Path, arg: &str) -> (f64, usize) {
    let mut total = 0.0;
    let mut n = 0;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return (0.0, 0);
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if std::fs::read_link(e.path().join("exe")).ok().as_deref() != Some(exe) {
            continue;
        }
        let argv = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if argv.split(|b| *b == 0).any(|a| a == arg.as_bytes()) {
            total += pss_kib(pid);
            n += 1;
        }
    }
    (total / 1024.0, n)
}

/// Admission's local proof counters now.
async fn local_proofs(
    stack: &Stack,
) -> anyhow::Result<clankie_proto::admission::v1::LocalProofStats> {
    let token = std::fs::read_to_string(stack.state.path().join("owner.token"))?;
    let mut admission = clankie_runtime::clients::admission(
        &stack.paths(),
        clankie_runtime::grpc::Meta::owner(token.trim()),
    );
    Ok(admission
        .fleet_status(clankie_proto::admission::v1::FleetStatusRequest {})
        .await?
        .into_inner()
        .local_proofs
        .unwrap_or_default())
}

/// Admission's counters: full proofs, rechecks, helper exchanges.
async fn proof_counters(stack: &Stack) -> anyhow::Result<[u64; 3]> {
    let s = local_proofs(stack).await?;
    Ok([s.proofs, s.reuses, s.helper_exchanges])
}

/// Full proofs so far, and refusals by reason.
async fn full_proofs(stack: &Stack) -> anyhow::Result<(u64, Vec<(String, u64)>)> {
    let s = local_proofs(stack).await?;
    let mut refusals: Vec<(String, u64)> = s.refusals.into_iter().collect();
    refusals.sort();
    Ok((s.proofs, refusals))
}

pub async fn bench_idle_seats(seats: usize) -> anyhow::Result<()> {
    println!("== {seats} connected bridges on one stack, each with its seat poll parked ==");
    let stack = Stack::start().await?;
    let tmux = stack.link_tmux("work");
    let (_workspace, lead) = crate::seats::bench_project(&stack, seats + 2)?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let base_rss = stack_rss_mib(&stack);
    let server = tmux_server(&tmux.socket);
    let (base_cpu, _, base_tmux) = idle_cpu(&stack, server, Duration::from_secs(20)).await;

    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    for i in 0..seats {
        crate::seats::hire_idle(&stack, &lead, dir.path(), &format!("s{i}"))?;
    }
    let hired = started.elapsed();
    for i in 0..seats {
        crate::seats::wait_for(
            &dir.path().join(format!("s{i}.seat")),
            Duration::from_secs(1800),
        )
        .await?;
    }
    // Reachable: the mailbox saw each seat's bridge poll.
    let token = std::fs::read_to_string(stack.state.path().join("owner.token"))?;
    let mut mailbox = clankie_runtime::clients::mailbox(
        &stack.paths(),
        clankie_runtime::grpc::Meta::owner(token.trim()),
    );
    loop {
        let present = mailbox
            .seat_diagnostics(clankie_proto::mailbox::v1::SeatDiagnosticsRequest {})
            .await?
            .into_inner()
            .seats
            .iter()
            .filter(|s| s.bridge_present)
            .count();
        if present >= seats {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "{present} of {seats} seats reachable after 30 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ready = started.elapsed();
    // Past one whole poll cycle (25 s), so every bridge has parked a long
    // poll since its first, and the start-up work is over.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let rss = stack_rss_mib(&stack);
    let rss_each = rss_by_process(&stack);
    println!("  (all {seats} reachable; measuring 60 s of idle)");
    let counted = proof_counters(&stack).await?;
    let (cpu, each, tmux_cpu) = idle_cpu(&stack, server, Duration::from_secs(60)).await;
    let after = proof_counters(&stack).await?;
    let rate = |i: usize| (after[i] - counted[i]) as f64 / 60.0;
    let (bridges, nb) = pss_of(&bin_dir().join("clankie"), "--fleet");
    let (harnesses, nh) = pss_of(&std::env::current_exe()?, "seat-idle");

    println!(
        "  hiring {seats} seats: {:.0} s of `clankie hire`; all reachable {:.0} s after the first",
        hired.as_secs_f64(),
        ready.as_secs_f64()
    );
    println!(
        "  stack RSS, no seats / {seats} seats   {base_rss:>8.1} / {rss:.1} MiB  (target ≤ 200 MB)"
    );
    println!("    by process (MiB): {rss_each}");
    println!(
        "  stack memory per seat               {:>8.1} KiB",
        (rss - base_rss) * 1024.0 / seats as f64
    );
    println!(
        "  stack idle CPU, no seats / {seats} seats {base_cpu:>6.2}% / {cpu:.2}% of one core  (target ≤ 2%)"
    );
    let names = SERVICES.iter().chain(&["helper"]);
    let each: Vec<String> = names
        .zip(&each)
        .map(|(n, c)| format!("{n} {c:.2}%"))
        .collect();
    println!("    by process: {}", each.join(", "));
    println!(
        "    while idle, per second: {:.2} full proofs, {:.2} rechecks, {:.2} helper exchanges",
        rate(0),
        rate(1),
        rate(2)
    );
    println!("  linked tmux server, no seats / {seats} seats {base_tmux:.2}% / {tmux_cpu:.2}%");
    println!(
        "  the hires' side (proportional memory): {nb} bridges {:.1} MiB ({:.1} each), {nh} harnesses {:.1} MiB",
        bridges,
        bridges / nb.max(1) as f64,
        harnesses
    );

    // Every bridge proven again after the gateway dies.
    let (before, refused_before) = full_proofs(&stack).await?;
    let t = Instant::now();
    stack.kill_restarted("gateway").await;
    let restarted = t.elapsed();
    loop {
        let (now, _) = full_proofs(&stack).await?;
        if now - before >= seats as u64 {
            break;
        }
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(600),
            "{} of {seats} bridges proven again in 10 minutes",
            now - before
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let back = t.elapsed();
    let (_, refused_after) = full_proofs(&stack).await?;
    let refused: Vec<String> = refused_after
        .iter()
        .filter_map(|(reason, n)| {
            let was = refused_before
                .iter()
                .find(|(r, _)| r == reason)
                .map_or(0, |(_, n)| *n);
            (*n > was).then(|| format!("{reason} {}", n - was))
        })
        .collect();
    println!(
        "  gateway kill -9 → restarted {:.2} s; all {seats} bridges proven again {:.2} s after the kill; refused on the way: {refused:?}",
        restarted.as_secs_f64(),
        back.as_secs_f64()
    );
    println!(
        "  stack RSS after the reconnect       {:>8.1} MiB",
        stack_rss_mib(&stack)
    );
    tmux.kill();
    Ok(())
}
