//! `clankie review`: the owner's list and show of landing review candidates,
//! and a seat's `review submit` from its pane (the submission itself is in
//! `bridge/submit.rs`, shared with the bridge's `submit_for_review`).

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::paths::StatePaths;
use clap::Subcommand;
use serde_json::{Value, json};

use crate::bridge::submit::submit;
use crate::support::clients::{self, refused};
use crate::support::discovery;
use crate::support::output::{field, print_json};

#[derive(Subcommand)]
pub enum ReviewCommand {
    /// Submit this pane's committed change (for seats without the review tools).
    Submit {
        /// Absolute path inside the git checkout.
        #[arg(long)]
        checkout: String,
        #[arg(long)]
        summary: String,
        #[arg(long, default_value = "")]
        issue: String,
        #[arg(long, default_value = "")]
        evidence: String,
        /// Diff from this commit instead of the merge base with origin/main.
        #[arg(long, default_value = "")]
        base: String,
    },
    /// Owner: every candidate.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Owner: one candidate with its patch.
    Show {
        candidate_id: String,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(paths: StatePaths, command: ReviewCommand) -> anyhow::Result<ExitCode> {
    match command {
        ReviewCommand::Submit {
            checkout,
            summary,
            issue,
            evidence,
            base,
        } => {
            let socket = discovery::local_socket(&paths)?;
            let pane = std::env::var("TMUX_PANE")
                .or_else(|_| std::env::var("HERDR_PANE_ID"))
                .map_err(|_| {
                    anyhow::anyhow!("run `clankie review submit` inside the seat's pane")
                })?;
            let args = json!({
                "checkout": checkout, "summary": summary, "issue": issue,
                "evidence": evidence, "base": base,
            });
            match submit(&socket, &pane, &args).await {
                Ok(v) => {
                    print_json(&v);
                    Ok(ExitCode::SUCCESS)
                }
                Err(v) => {
                    let e = clankie_types::fleet::ErrorBody::read(&v);
                    eprintln!(
                        "clankie: refused ({}): {}",
                        e.as_ref().map_or("unknown", |e| e.code.as_str()),
                        e.as_ref().map_or("", |e| e.message.as_str())
                    );
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        ReviewCommand::List { json } | ReviewCommand::Show { json, .. } => {
            let id = match &command {
                ReviewCommand::Show { candidate_id, .. } => candidate_id.clone(),
                _ => String::new(),
            };
            let mut client = clients::mailbox(&paths)?;
            let all = client
                .list_reviews(mailbox_pb::ListReviewsRequest {
                    candidate_id: id.clone(),
                })
                .await
                .map_err(refused)?
                .into_inner()
                .candidates;
            if !json {
                if id.is_empty() {
                    if all.is_empty() {
                        println!("no review candidates");
                    }
                    for c in &all {
                        println!("{}", candidate_line(c));
                    }
                } else {
                    let c = all
                        .first()
                        .ok_or_else(|| anyhow::anyhow!("no candidate {id}"))?;
                    print_candidate(c);
                }
            } else if id.is_empty() {
                let list: Vec<Value> = all
                    .iter()
                    .map(|c| clankie_types::views::candidate(c, false))
                    .collect();
                print_json(&json!({ "candidates": list }));
            } else {
                let c = all
                    .first()
                    .ok_or_else(|| anyhow::anyhow!("no candidate {id}"))?;
                let v = clankie_types::views::candidate(c, true);
                print_json(&v);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One candidate on one line: id, state, project, author and summary.
fn candidate_line(c: &mailbox_pb::ReviewCandidate) -> String {
    format!(
        "{}  {:<10} project {}  seat {}  {}",
        field(&c.candidate_id),
        clankie_types::landing::ReviewState::wire_word(c.state),
        field(&c.project_id),
        field(&c.author_seat),
        field(&c.summary)
    )
}

/// A candidate in full: what it is, its findings, then its patch. Every
/// word a seat wrote is shown escaped.
fn print_candidate(c: &mailbox_pb::ReviewCandidate) {
    println!("{}", candidate_line(c));
    println!("  checkout {}", field(&c.checkout));
    println!("  head {}  base {}", field(&c.head), field(&c.base));
    println!(
        "  patch {} sha256 {}",
        field(&c.patch_id),
        field(&c.patch_sha256)
    );
    if !c.issue.is_empty() {
        println!("  issue {}", field(&c.issue));
    }
    if !c.reviewer_seat.is_empty() {
        println!("  reviewer seat {}", field(&c.reviewer_seat));
    }
    if !c.evidence.is_empty() {
        println!("  evidence {}", field(&c.evidence));
    }
    if !c.verdict_summary.is_empty() {
        println!("  verdict {}", field(&c.verdict_summary));
    }
    for f in &c.findings {
        println!("  finding {}:{} {}", field(&f.file), f.line, field(&f.text));
    }
    println!();
    for l in String::from_utf8_lossy(&c.patch).lines() {
        println!("{}", field(l));
    }
}
