//! `clankie auto`: Projects on Auto: the master switch, the saved level and
//! the scheduler's status.

use std::process::ExitCode;

use clankie_proto::auto::v1 as auto_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::autonomy::AutonomyLevel;
use clap::Subcommand;
use serde_json::json;

use crate::support::clients::{self, refused};
use crate::support::output::print_json;

#[derive(Subcommand)]
pub enum AutoCommand {
    /// Turn the master switch on: Auto rounds and scheduled self-wakes run.
    On,
    /// Turn the master switch off: rounds and self-wakes stop together.
    Off,
    /// Save the owner's global autonomy level.
    Level {
        #[arg(value_parser = ["off", "propose", "full"])]
        level: String,
    },
    /// The switch, the cadence, each lead's fence and the last round.
    Status {
        #[arg(long)]
        json: bool,
    },
}

fn autonomy_json(a: &auto_pb::Autonomy) -> serde_json::Value {
    json!({
        "on": a.on,
        "level": AutonomyLevel::wire_word(a.level),
        "readable": a.readable,
        "problem": (!a.problem.is_empty()).then_some(&a.problem),
        "scheduled": a.scheduled.iter().map(|w| json!({
            "wakeId": w.wake_id, "conversationId": w.conversation_id, "atMs": w.at_ms, "note": w.note,
        })).collect::<Vec<_>>(),
    })
}

pub async fn run(paths: StatePaths, command: AutoCommand) -> anyhow::Result<ExitCode> {
    let mut c = clients::auto(&paths)?;
    let req = match command {
        AutoCommand::On => Some((Some(true), None)),
        AutoCommand::Off => Some((Some(false), None)),
        AutoCommand::Level { ref level } => Some((
            None,
            Some(
                AutonomyLevel::parse(level)
                    .ok_or_else(|| anyhow::anyhow!("level {level}: choose off, propose or full"))?
                    .wire(),
            ),
        )),
        AutoCommand::Status { .. } => None,
    };
    if let Some((on, level)) = req {
        let a = c
            .set_switch(auto_pb::SetSwitchRequest { on, level })
            .await
            .map_err(refused)?
            .into_inner();
        print_json(&autonomy_json(&a));
        return Ok(ExitCode::SUCCESS);
    }
    match command {
        AutoCommand::On | AutoCommand::Off | AutoCommand::Level { .. } => {}
        AutoCommand::Status { json } => {
            let s = c
                .status(auto_pb::StatusRequest {})
                .await
                .map_err(refused)?
                .into_inner();
            let a = s.autonomy.unwrap_or_default();
            let last = s.last_round.unwrap_or_default();
            let v = json!({
                "autonomy": autonomy_json(&a),
                "nextDeadlineMs": s.next_deadline_ms,
                "cadenceProblem": (!s.cadence_problem.is_empty()).then_some(&s.cadence_problem),
                "tickMs": s.tick_ms,
                "idleMs": s.idle_ms,
                "rounds": s.rounds,
                "leads": s.leads.iter().map(|l| json!({
                    "conversationId": l.conversation_id,
                    "acceptedFingerprint": l.accepted_fingerprint,
                    "acceptedAtMs": l.accepted_at_ms,
                    "pendingWakeId": (!l.pending_wake_id.is_empty()).then_some(&l.pending_wake_id),
                })).collect::<Vec<_>>(),
                "lastRound": {
                    "roundId": last.round_id,
                    "deadlineMs": last.deadline_ms,
                    "startedMs": last.started_ms,
                    "finishedMs": last.finished_ms,
                    "cpuUs": last.cpu_us,
                    "projects": last.projects,
                    "leads": last.leads,
                    "woken": last.woken,
                    "suppressed": last.suppressed,
                    "lastAcceptedMs": last.last_accepted_ms,
                    "skipped": last.skipped,
                },
            });
            if json {
                print_json(&v);
            } else {
                println!(
                    "switch {} (level {}){}",
                    if a.on { "on" } else { "off" },
                    AutonomyLevel::wire_word(a.level),
                    if a.readable {
                        String::new()
                    } else {
                        format!(": unreadable, {}", a.problem)
                    }
                );
                if s.cadence_problem.is_empty() {
                    println!(
                        "next round at {} ms; {} rounds run",
                        s.next_deadline_ms, s.rounds
                    );
                } else {
                    println!("no Auto checks: {}", s.cadence_problem);
                }
                println!(
                    "last round: {} woken, {} suppressed of {} leads{}",
                    last.woken,
                    last.suppressed,
                    last.leads,
                    if last.skipped.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", last.skipped)
                    }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
