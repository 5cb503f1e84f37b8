//! The tracker's Linear-compatible tool vocabulary and its role profiles.
//!
//! It has no storage dependency: the MCP host uses it to show each role its
//! catalog and to refuse profile violations before dispatch, and the
//! tracker's store dispatches the same tables behind it.
//!
//! - 61 tools. Names are unqualified (`get_issue`); the host shows them as
//!   `linear_get_issue`.
//! - Owner and lead see and may call everything. Reviewers and workers
//!   ("limited" roles) do not see the 8 lead-only tools, cannot set `cycle`
//!   or a completed-category state through `save_issue`, and cannot post the
//!   `owner-verified` issue event.
//! - Every schema is a closed JSON object schema (`additionalProperties:
//!   false`) that also allows the routing-only `repo`; write tools take an
//!   optional `idempotencyKey`, update-style writes an optional `ifUpdatedAt`,
//!   and issue reads an optional `linearHistory`.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

// The tool families, and the schema builders they share.
mod directory;
mod inbox;
mod issues;
mod plan;
mod projects;
mod review;
mod schema;
mod work;

use directory::*;
use inbox::*;
use issues::*;
use plan::*;
use projects::*;
use review::*;
use schema::*;
use work::*;

/// The tools that publish as a worker persona. They are never in the fleet
/// catalog, on any account; a grant reaches one only by pinning `personaId`.
pub const WORKER_PUBLISHING: &[&str] = &["create_worker_comment", "create_worker_issue"];

/// Whether `tool` (its upstream name) publishes as a worker persona. Keyed
/// on the tool's vocabulary, on every account, never on what an account is
/// called.
pub fn worker_publishing(tool: &str) -> bool {
    WORKER_PUBLISHING.contains(&tool)
}

/// The workflow states every team starts with: (name, category).
pub const STATES: &[(&str, &str)] = &[
    ("Backlog", "backlog"),
    ("Todo", "unstarted"),
    ("In Progress", "started"),
    ("In Review", "started"),
    ("Done", "completed"),
    ("Canceled", "canceled"),
    ("Duplicate", "canceled"),
];

/// The state categories, in workflow order.
pub const STATE_TYPES: &[&str] = &["backlog", "unstarted", "started", "completed", "canceled"];

/// The category of a state name, case-insensitively.
pub fn state_type(name: &str) -> Option<(&'static str, &'static str)> {
    STATES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .copied()
}

/// Whether a state name belongs to the completed category.
pub fn is_completed_state(name: &str) -> bool {
    state_type(name).is_some_and(|(_, t)| t == "completed")
}

/// The project statuses, in order.
pub const PROJECT_STATUSES: &[&str] = &[
    "backlog",
    "planned",
    "started",
    "paused",
    "completed",
    "canceled",
];

/// The stages an issue event can record.
pub const EVENT_STAGES: &[&str] = &[
    "claimed",
    "started",
    "blocked",
    "evidence",
    "ready-for-review",
    "reviewed",
    "owner-verified",
    "released",
    "note",
];

/// The stage only the owner's route (or the lead) may record.
pub const OWNER_VERIFIED: &str = "owner-verified";

/// Project status update health values.
pub const HEALTH: &[&str] = &["onTrack", "atRisk", "offTrack"];

/// Run statuses; the last three are terminal.
pub const RUN_STATUSES: &[&str] = &["queued", "running", "succeeded", "failed", "canceled"];

/// Run control actions (lead only).
pub const RUN_ACTIONS: &[&str] = &["pause", "resume", "cancel"];

/// Guided review states: a draft is being written, a ready review waits
/// for the owner, a retired one is closed.
pub const REVIEW_STATES: &[&str] = &["draft", "ready", "retired"];

/// Outcomes of one guided review step.
pub const STEP_OUTCOMES: &[&str] = &["pass", "fail", "skip"];

/// Outcomes of an evidence bundle check.
pub const CHECK_OUTCOMES: &[&str] = &["pass", "fail"];

/// States a lead can give an inbox item.
pub const INBOX_STATES: &[&str] = &["read", "snoozed", "archived"];

pub use crate::role::Role;

/// One tool of the vocabulary.
#[derive(Debug, Clone)]
pub struct ToolDef {
    /// Unqualified, e.g. `get_issue` (the host shows it as `linear_get_issue`).
    pub name: &'static str,
    /// The first line is a one-line summary; the rest says what it returns.
    pub description: String,
    /// The full (owner/lead) input schema.
    pub schema: Value,
    /// Writes to the store (counts against write budgets).
    pub write: bool,
    /// Hidden from reviewers and workers.
    pub lead_only: bool,
    /// The family it belongs to (one file of this module each).
    pub family: Family,
}

/// A family of tools: one file of the vocabulary, and one of the tracker's
/// dispatcher and store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Issues,
    Projects,
    Directory,
    Work,
    Plan,
    Review,
    Inbox,
}

/// A profile refusal: the call names something the caller's role may not use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct Refusal {
    pub role: Role,
    pub tool: String,
    /// A human sentence naming the role, e.g. "save_issue_status is not
    /// available to the worker role".
    pub what: String,
}

impl Refusal {
    /// The machine-readable refusal code the host reports.
    pub const CODE: &'static str = "role_not_allowed";
}

/// The whole vocabulary, built once.
pub fn vocabulary() -> &'static [ToolDef] {
    static VOCABULARY: OnceLock<Vec<ToolDef>> = OnceLock::new();
    VOCABULARY.get_or_init(build)
}

/// A tool by unqualified name.
pub fn find(name: &str) -> Option<&'static ToolDef> {
    vocabulary().iter().find(|t| t.name == name)
}

/// Whether a call to `tool` writes to the store. Unknown tools do not.
pub fn is_write(tool: &str) -> bool {
    find(tool).is_some_and(|t| t.write)
}

/// The schema a role sees: `None` when the tool is hidden from that role.
/// For limited roles `save_issue` has no `cycle` and offers no
/// completed-category state, and `post_issue_event` offers no
/// `owner-verified` stage.
pub fn schema_for(def: &ToolDef, role: Role) -> Option<Value> {
    if !role.limited() {
        return Some(def.schema.clone());
    }
    if def.lead_only {
        return None;
    }
    let mut schema = def.schema.clone();
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        match def.name {
            "save_issue" => {
                props.remove("cycle");
                props.insert("state".into(), state_prop(false));
            }
            "post_issue_event" => {
                props.insert("stage".into(), stage_prop(false));
            }
            _ => {}
        }
    }
    Some(schema)
}

/// The tools a role sees, with the schema it sees for each.
pub fn catalog(role: Role) -> Vec<(&'static ToolDef, Value)> {
    vocabulary()
        .iter()
        .filter_map(|d| schema_for(d, role).map(|s| (d, s)))
        .collect()
}

/// Bytes of the catalog a role sees: each visible tool's name, description
/// and compact serialized schema. Divide by 4 for a rough token estimate.
pub fn schema_bytes(role: Role) -> usize {
    catalog(role)
        .iter()
        .map(|(d, s)| d.name.len() + d.description.len() + s.to_string().len())
        .sum()
}

/// The host's profile check, before dispatch. Owner and lead are never
/// refused; unknown tool names pass (the host handles those).
pub fn check_profile(tool: &str, role: Role, args: &Value) -> Result<(), Refusal> {
    if !role.limited() {
        return Ok(());
    }
    let Some(def) = find(tool) else {
        return Ok(());
    };
    let refuse = |what: String| {
        Err(Refusal {
            role,
            tool: tool.to_string(),
            what,
        })
    };
    if def.lead_only {
        return refuse(format!("{tool} is not available to the {role} role"));
    }
    match tool {
        "save_issue" => {
            if args.get("cycle").is_some() {
                return refuse(format!(
                    "save_issue cannot set cycle for the {role} role; the lead plans cycles"
                ));
            }
            if let Some(state) = args.get("state").and_then(Value::as_str)
                && is_completed_state(state)
            {
                return refuse(format!(
                    "save_issue cannot move an issue to the completed state {state} for the {role} role; \
                     post a ready-for-review event and the owner verifies it"
                ));
            }
        }
        "post_issue_event" if args.get("stage").and_then(Value::as_str) == Some(OWNER_VERIFIED) => {
            return refuse(format!(
                "the owner-verified stage is not available to the {role} role; only the owner verifies"
            ));
        }
        _ => {}
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Schema construction.

const WRITE: u8 = 1;

const UPDATE: u8 = 2 | WRITE;

const LEAD: u8 = 4;

const HISTORY: u8 = 8;

const READ: u8 = 0;

const DEFAULT_LIMIT: i64 = 50;

/// The largest page any list returns.
pub const MAX_LIMIT: i64 = 250;

/// The largest page of `list_changes`.
pub const MAX_CHANGES_LIMIT: i64 = 500;

/// The longest `list_changes` wait.
pub const MAX_WAIT_MS: i64 = 20_000;

/// Lease lifetimes.
pub const MIN_LEASE_MS: i64 = 1_000;

pub const MAX_LEASE_MS: i64 = 86_400_000;

pub const DEFAULT_LEASE_MS: i64 = 3_600_000;

fn build() -> Vec<ToolDef> {
    let families = [
        (Family::Issues, issue_tools()),
        (Family::Projects, project_tools()),
        (Family::Directory, directory_tools()),
        (Family::Work, work_tools()),
        (Family::Plan, plan_tools()),
        (Family::Review, review_tools()),
        (Family::Inbox, inbox_tools()),
    ];
    let mut v = Vec::with_capacity(61);
    for (family, tools) in families {
        v.extend(tools.into_iter().map(|t| ToolDef { family, ..t }));
    }
    v
}

#[cfg(test)]
mod tests;
