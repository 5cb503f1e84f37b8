//! The Auto round benchmark: a real stack with 200 projects on Auto owned
//! by 50 leads (four each, by tracker binding), each round run on request.
//! Beside it in the same run: an empty round (the switch on, no project on
//! Auto) and a round whose evidence is unchanged (every lead suppressed).
//! Figures: the scheduler's CPU time per round, and the time from the
//! round's deadline to the last wake accepted (or to the round's end).

use std::time::Duration;

use clankie_proto::auto::v1 as auto_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::clients;
use clankie_runtime::grpc::{Client, Meta};
use clankie_tests::{Stack, StackOptions};

type Mailbox = mailbox_pb::mailbox_client::MailboxClient<Client>;
type Auto = auto_pb::auto_client::AutoClient<Client>;

async fn clients(stack: &Stack) -> anyhow::Result<(Mailbox, Auto)> {
    let token = std::fs::read_to_string(stack.state.path().join("owner.token"))?;
    let meta = Meta::owner(token.trim());
    Ok((
        clients::mailbox(&stack.paths(), meta.clone()),
        clients::auto(&stack.paths(), meta),
    ))
}

struct Figures {
    cpu_ms: Vec<f64>,
    to_last_ms: Vec<f64>,
    woken: u32,
    suppressed: u32,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn report(name: &str, f: &mut Figures) {
    println!(
        "  {name:<36} cpu {:>8.2} ms   deadline → last wake {:>8.1} ms   (woken {}, suppressed {})",
        median(&mut f.cpu_ms),
        median(&mut f.to_last_ms),
        f.woken,
        f.suppressed
    );
}

async fn round(auto: &mut Auto, f: &mut Figures) -> anyhow::Result<()> {
    let s = auto
        .run_round(auto_pb::RunRoundRequest {})
        .await?
        .into_inner();
    f.cpu_ms.push(s.cpu_us as f64 / 1000.0);
    let last = if s.last_accepted_ms > 0 {
        s.last_accepted_ms
    } else {
        s.finished_ms
    };
    f.to_last_ms.push((last - s.deadline_ms) as f64);
    f.woken = s.woken;
    f.suppressed = s.suppressed;
    Ok(())
}

fn figures() -> Figures {
    Figures {
        cpu_ms: Vec::new(),
        to_last_ms: Vec::new(),
        woken: 0,
        suppressed: 0,
    }
}

pub async fn bench_auto(rounds: usize) -> anyhow::Result<()> {
    let projects = 200;
    let leads = 50;
    let stack = Stack::start_with(StackOptions {
        // No scheduled round during the run: every round is requested.
        auto_tick_ms: Some(3_600_000),
        ..Default::default()
    })
    .await?;
    let (mut mailbox, mut auto) = clients(&stack).await?;
    let folders = tempfile::tempdir()?;
    for i in 0..projects {
        let ws = folders.path().join(format!("p{i}"));
        std::fs::create_dir_all(&ws)?;
        mailbox
            .add_project(mailbox_pb::AddProjectRequest {
                name: format!("p{i}"),
                workspace: ws.display().to_string(),
                ..Default::default()
            })
            .await?;
    }
    for l in 0..leads {
        mailbox
            .add_conversation(mailbox_pb::AddConversationRequest {
                title: format!("lead {l}"),
                workspace: String::new(),
                projects: (0..projects / leads)
                    .map(|k| format!("T{}", l * (projects / leads) + k))
                    .collect(),
            })
            .await?;
    }
    auto.set_switch(auto_pb::SetSwitchRequest {
        on: Some(true),
        level: Some(clankie_types::autonomy::AutonomyLevel::Full.wire()),
    })
    .await?;
    let mut empty = figures();
    for _ in 0..rounds {
        round(&mut auto, &mut empty).await?;
    }
    // Every project on Auto, bound to its lead's team.
    let set_all = |mailbox: &mut Mailbox, focus: String| {
        let mut mailbox = mailbox.clone();
        async move {
            let list = mailbox
                .list_projects(mailbox_pb::ListProjectsRequest {})
                .await?
                .into_inner()
                .projects;
            for p in list {
                let i: usize = p.name.trim_start_matches('p').parse().unwrap_or(0);
                mailbox
                    .update_project(mailbox_pb::UpdateProjectRequest {
                        project: p.project_id.clone(),
                        expected_revision: p.revision,
                        tracker: Some(clankie_types::TrackerBinding::Builtin.wire()),
                        tracker_team: Some(format!("T{i}")),
                        auto: Some(true),
                        focus: Some(focus.clone()),
                        ..Default::default()
                    })
                    .await?;
            }
            anyhow::Ok(())
        }
    };
    let mut full = figures();
    let mut idle = figures();
    for r in 0..rounds {
        // New evidence for every lead: the round wakes all 50.
        set_all(&mut mailbox, format!("focus {r}")).await?;
        round(&mut auto, &mut full).await?;
        // Unchanged evidence: every lead suppressed.
        round(&mut auto, &mut idle).await?;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    println!(
        "auto: one round, {projects} projects on Auto, {leads} leads ({rounds} rounds each, medians)"
    );
    report("empty (switch on, nothing on Auto)", &mut empty);
    report("all 50 leads woken", &mut full);
    report("unchanged evidence (all suppressed)", &mut idle);
    Ok(())
}
