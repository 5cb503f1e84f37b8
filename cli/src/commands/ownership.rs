//! The doctor's tracker ownership check (seed 003, "Retirement issue
//! bookkeeping"): the live leases in each tracker scope, counted only where
//! they are attributable to a hire of a project. Leases held by the owner,
//! an operator head, a native child (a pane no hire names) or a hire the
//! mailbox does not know are listed apart as excluded, never assigned to a
//! default connector.

use std::collections::{BTreeMap, HashMap};

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::paths::StatePaths;
use serde_json::{Value, json};

use crate::support::clients;

/// Why a holder's leases are not counted.
fn excluded_why(
    holder: &str,
    hires: &HashMap<&str, &mailbox_pb::HireRecord>,
) -> Option<&'static str> {
    if let Some(id) = holder.strip_prefix("hire:") {
        return match hires.get(id) {
            Some(h) if !h.project_id.is_empty() => None,
            Some(_) => Some("hire-of-no-project"),
            None => Some("unknown-hire"),
        };
    }
    Some(if holder == "owner" {
        "owner"
    } else if holder.starts_with("lead:") {
        "operator-head"
    } else if holder.starts_with("fleet:") {
        "native-child"
    } else {
        "unscoped"
    })
}

/// The check as JSON: per scope the attributable count, each attributable
/// hire's leases, and every excluded holder with its reason.
pub fn check(owned: &[tracker_pb::OwnedLeases], hires: &[mailbox_pb::HireRecord]) -> Value {
    let by_id: HashMap<&str, &mailbox_pb::HireRecord> =
        hires.iter().map(|h| (h.hire_id.as_str(), h)).collect();
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    let mut attributable = Vec::new();
    let mut excluded = Vec::new();
    for o in owned {
        match excluded_why(&o.holder, &by_id) {
            None => {
                *counts.entry(&o.scope).or_default() += o.leases;
                let hire = &by_id[&o.holder["hire:".len()..]];
                attributable.push(json!({
                    "scope": o.scope,
                    "hireId": hire.hire_id,
                    "projectId": hire.project_id,
                    "leases": o.leases,
                }));
            }
            Some(why) => excluded.push(json!({
                "scope": o.scope,
                "holder": o.holder,
                "why": why,
                "leases": o.leases,
            })),
        }
    }
    json!({ "counts": counts, "attributable": attributable, "excluded": excluded })
}

/// The check from the tracker's leases and the mailbox's hires; None when
/// either cannot say.
pub async fn ownership(paths: &StatePaths) -> Option<Value> {
    let owned = clients::tracker(paths)
        .ok()?
        .ownership(tracker_pb::OwnershipRequest {})
        .await
        .ok()?
        .into_inner()
        .owned;
    let hires = clients::mailbox(paths)
        .ok()?
        .roster(mailbox_pb::RosterRequest {})
        .await
        .ok()?
        .into_inner()
        .hires;
    Some(check(&owned, &hires))
}

/// One line: what is counted and what is left out.
pub fn summary(check: &Value) -> String {
    let counted: u64 = check["counts"]
        .as_object()
        .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
    let scopes = check["counts"].as_object().map_or(0, |m| m.len());
    let excluded: u64 = check["excluded"]
        .as_array()
        .map_or(0, |a| a.iter().filter_map(|e| e["leases"].as_u64()).sum());
    format!("{counted} attributable leases in {scopes} scopes; {excluded} excluded")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(scope: &str, holder: &str, leases: u32) -> tracker_pb::OwnedLeases {
        tracker_pb::OwnedLeases {
            scope: scope.into(),
            holder: holder.into(),
            leases,
        }
    }

    #[test]
    fn only_hires_of_a_project_are_counted_and_the_rest_is_listed_with_its_reason() {
        let hires = vec![
            mailbox_pb::HireRecord {
                hire_id: "h1".into(),
                project_id: "p1".into(),
                ..Default::default()
            },
            mailbox_pb::HireRecord {
                hire_id: "h2".into(),
                ..Default::default()
            },
        ];
        let c = check(
            &[
                owned("builtin:ENG", "hire:h1", 2),
                owned("linear:user:u/workspace:w:p1", "hire:h1", 1),
                owned("builtin:ENG", "hire:h2", 1),
                owned("builtin:ENG", "hire:gone", 1),
                owned("builtin:ENG", "owner", 1),
                owned("builtin:ENG", "lead:global-default", 1),
                owned("builtin:ENG", "fleet:f:pane:3", 1),
                owned("builtin:ENG", "someone", 1),
            ],
            &hires,
        );
        assert_eq!(
            c["counts"],
            json!({"builtin:ENG": 2, "linear:user:u/workspace:w:p1": 1})
        );
        let whys: Vec<&str> = c["excluded"]
            .as_array()
            .expect("excluded")
            .iter()
            .map(|e| e["why"].as_str().expect("why"))
            .collect();
        assert_eq!(
            whys,
            [
                "hire-of-no-project",
                "unknown-hire",
                "owner",
                "operator-head",
                "native-child",
                "unscoped"
            ]
        );
        assert_eq!(summary(&c), "3 attributable leases in 2 scopes; 6 excluded");
    }
}
