//! The worker sandbox's cost at the start of a hire: from the hire request
//! (the pane is opened) until the hired command's first instruction runs,
//! sandboxed beside unsandboxed, interleaved round by round on one stack.
//!
//! The command is `/bin/sh -c 'date +%s%N > FILE; exec sleep 600'` in the
//! workspace (writable in both), so the measured span is the mailbox's
//! hire, tmux opening the pane, the shell, and (when on) bubblewrap's
//! namespaces and mounts, up to the first instruction of the command.

use std::time::Duration;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::grpc::Meta;
use clankie_tests::{Stack, eventually};

use crate::{line, summarize, us};

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

pub async fn bench_sandbox(rounds: usize) -> anyhow::Result<()> {
    println!("== a hire's start: pane opened → first command runs, sandboxed vs not ==");
    let stack = Stack::start().await?;
    let tmux = stack.link_tmux("work");
    let workspace = tempfile::tempdir()?;
    let ws = workspace.path().display().to_string();
    stack.clankie_ok(&[
        "project",
        "add",
        "bench",
        "--workspace",
        &ws,
        "--worker-cap",
        "8",
    ]);
    let paths = stack.paths();
    let owner = clankie_runtime::owner::read_owner_token(&paths.owner_credential())?;
    let mut mailbox = clankie_runtime::clients::mailbox(&paths, Meta::owner(&owner));
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for round in 0..rounds * 2 {
        let sandboxed = round % 2 == 1;
        let setting = if sandboxed { "on" } else { "off" };
        stack.clankie_ok(&["fleet", "set", "--worker-sandbox", setting]);
        let mark = workspace.path().join(format!("start-{round}"));
        let script = format!("date +%s%N > {}; exec sleep 600", mark.display());
        let started = now_ns();
        let hire = mailbox
            .hire(mailbox_pb::HireRequest {
                project: "bench".into(),
                command: vec!["/bin/sh".into(), "-c".into(), script],
                ..Default::default()
            })
            .await?
            .into_inner();
        anyhow::ensure!(hire.sandboxed == sandboxed, "the setting took");
        let ran: u128 = eventually(Duration::from_secs(30), async || {
            std::fs::read_to_string(&mark).ok()?.trim().parse().ok()
        })
        .await
        .ok_or_else(|| anyhow::anyhow!("the hired command never ran"))?;
        let took = Duration::from_nanos(ran.saturating_sub(started) as u64);
        if sandboxed {
            on.push(took);
        } else {
            off.push(took);
        }
        mailbox
            .close_hire(mailbox_pb::CloseHireRequest {
                hire_id: hire.hire_id,
                ..Default::default()
            })
            .await?;
    }
    let (off, on) = (summarize(off), summarize(on));
    line("unsandboxed", &off);
    line("sandboxed (bubblewrap)", &on);
    println!(
        "  sandboxed / unsandboxed: p50 ×{:.2}, p99 ×{:.2}",
        us(on.p50) / us(off.p50),
        us(on.p99) / us(off.p99)
    );
    drop(tmux);
    Ok(())
}
