//! `clankie roster` and `clankie herdr agent list`: every hire with its lead.

use std::process::ExitCode;

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::paths::StatePaths;
use serde_json::json;

use crate::support::clients::{self, refused};
use crate::support::output::{field, print_json};
use clankie_types::hire::HireEnd;

pub use clankie_types::views::hire as hire_json;

pub async fn roster(paths: StatePaths, json_out: bool) -> anyhow::Result<ExitCode> {
    let hires = clients::mailbox(&paths)?
        .roster(mailbox_pb::RosterRequest {})
        .await
        .map_err(refused)?
        .into_inner()
        .hires;
    if json_out {
        print_json(&json!({ "hires": hires.iter().map(hire_json).collect::<Vec<_>>() }));
    } else {
        for h in &hires {
            println!(
                "{}  {}  {}  pane {}  lead {}{}{}",
                field(&h.hire_id),
                field(clankie_types::Role::wire_word(h.role)),
                field(&h.project_id),
                field(&h.pane_id),
                if h.owner_present {
                    field(&h.conversation_id)
                } else {
                    "unowned".into()
                },
                match HireEnd::from_wire(h.ended) {
                    None => String::new(),
                    Some(end) => format!("  ({end})"),
                },
                if h.sandboxed { "  sandboxed" } else { "" }
            );
            if h.bridge_freshness
                == clankie_types::diagnostics::BridgeFreshness::OlderThanRuntime.wire()
                && HireEnd::open(h.ended)
            {
                println!("    bridge older-than-runtime: reload the seat");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The roster as Herdr users read it: owner, hired, and `mine` for the
/// conversation in CLANKIE_CONVERSATION_ID.
pub async fn agent_list(paths: StatePaths, json_out: bool) -> anyhow::Result<ExitCode> {
    let mine = std::env::var("CLANKIE_CONVERSATION_ID").unwrap_or_default();
    let hires = clients::mailbox(&paths)?
        .roster(mailbox_pb::RosterRequest {})
        .await
        .map_err(refused)?
        .into_inner()
        .hires;
    let rows: Vec<serde_json::Value> = hires
        .iter()
        .filter(|h| HireEnd::open(h.ended))
        .map(|h| {
            let mut v = hire_json(h);
            v["owner"] = v["lead"].clone();
            v["hired"] = json!(true);
            if !mine.is_empty() {
                v["mine"] = json!(h.owner_present && h.conversation_id == mine);
            }
            v
        })
        .collect();
    if json_out {
        print_json(&json!({ "agents": rows }));
    } else {
        for r in &rows {
            println!(
                "{}  pane {}  {}  owner {}{}",
                field(r["hireId"].as_str().unwrap_or("")),
                field(r["paneId"].as_str().unwrap_or("")),
                field(r["role"].as_str().unwrap_or("")),
                field(r["owner"].as_str().unwrap_or("")),
                if r["mine"] == true { "  (mine)" } else { "" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
