//! The tracker's Linear-compatible tool vocabulary and its role profiles.
//!
//! This module has no storage dependency: the MCP host uses it (with the
//! crate's default features off) to show each role its catalog and to refuse
//! profile violations before dispatch, and the store's tool dispatcher uses
//! the same tables behind it.
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

/// A caller's tracker role, resolved by the host (never from arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Lead,
    Reviewer,
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Lead => "lead",
            Role::Reviewer => "reviewer",
            Role::Worker => "worker",
        }
    }

    /// Reviewers and workers get the limited profile.
    pub fn limited(self) -> bool {
        matches!(self, Role::Reviewer | Role::Worker)
    }

    /// Parses the lowercase name.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "lead" => Some(Role::Lead),
            "reviewer" => Some(Role::Reviewer),
            "worker" => Some(Role::Worker),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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

struct Prop {
    name: &'static str,
    required: bool,
    schema: Value,
}

fn req(name: &'static str, schema: Value) -> Prop {
    Prop {
        name,
        required: true,
        schema,
    }
}

fn opt(name: &'static str, schema: Value) -> Prop {
    Prop {
        name,
        required: false,
        schema,
    }
}

fn string(desc: &str) -> Value {
    json!({"type": "string", "minLength": 1, "description": desc})
}

/// A string that may be empty (to clear a field).
fn clearable(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

fn text(desc: &str, max: u32) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max, "description": desc})
}

fn boolean(desc: &str) -> Value {
    json!({"type": "boolean", "description": desc})
}

fn integer(desc: &str, min: i64, max: i64) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max, "description": desc})
}

fn one_of(desc: &str, values: &[&str]) -> Value {
    json!({"type": "string", "enum": values, "description": desc})
}

fn limit() -> Prop {
    opt(
        "limit",
        integer(
            &format!("At most this many results (default {DEFAULT_LIMIT})."),
            1,
            MAX_LIMIT,
        ),
    )
}

fn page_cursor() -> Prop {
    opt(
        "cursor",
        string("The cursor from the previous page's result, to read the next page."),
    )
}

fn team_filter() -> Prop {
    opt("team", string("Team key, id or name."))
}

fn issue_ref(desc: &str) -> Value {
    string(&format!(
        "{desc} Issue identifier (TEAM-n or LOCAL-TEAM-n), UUID or Linear UUID."
    ))
}

fn state_prop(include_completed: bool) -> Value {
    let names: Vec<&str> = STATES
        .iter()
        .filter(|(_, t)| include_completed || *t != "completed")
        .map(|(n, _)| *n)
        .collect();
    json!({
        "type": "string",
        "enum": names,
        "description": format!("Workflow state: {}.", names.join(", ")),
    })
}

fn stage_prop(include_owner_verified: bool) -> Value {
    let stages: Vec<&str> = EVENT_STAGES
        .iter()
        .copied()
        .filter(|s| include_owner_verified || *s != OWNER_VERIFIED)
        .collect();
    json!({
        "type": "string",
        "enum": stages,
        "description": "The stage this event records.",
    })
}

fn tool(name: &'static str, flags: u8, description: &str, props: Vec<Prop>) -> ToolDef {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for p in props {
        if p.required {
            required.push(Value::from(p.name));
        }
        properties.insert(p.name.into(), p.schema);
    }
    if flags & HISTORY != 0 {
        properties.insert(
            "linearHistory".into(),
            boolean(
                "Read the frozen Linear copy of an imported item, marked as history. \
                 The host routes it; the built-in tracker ignores it.",
            ),
        );
    }
    if flags & WRITE != 0 {
        properties.insert(
            "idempotencyKey".into(),
            json!({
                "type": "string", "minLength": 1, "maxLength": 200,
                "description": "Your key for this write. Repeating it returns the original result with replayed: true and writes nothing."
            }),
        );
    }
    if flags & UPDATE == UPDATE {
        properties.insert(
            "ifUpdatedAt".into(),
            json!({
                "type": "integer",
                "description": "Update only if the item's updatedAt (ms) is still this value; otherwise a conflict, and nothing is written."
            }),
        );
    }
    properties.insert(
        "repo".into(),
        string("Routing only: the repository whose tracker should answer. The tracker itself ignores it."),
    );
    let mut schema = Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), false.into());
    ToolDef {
        name,
        description: description.to_string(),
        schema: Value::Object(schema),
        write: flags & WRITE != 0,
        lead_only: flags & LEAD != 0,
    }
}

fn build() -> Vec<ToolDef> {
    let mut v = Vec::with_capacity(61);
    v.extend(issue_tools());
    v.extend(project_tools());
    v.extend(directory_tools());
    v.extend(work_tools());
    v.extend(plan_tools());
    v.extend(review_tools());
    v.extend(inbox_tools());
    v
}

fn issue_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "get_issue",
            READ | HISTORY,
            "Get one issue by identifier, UUID or Linear UUID.\n\
             Returns {issue}: id, identifier, title, description, state and stateType, priority \
             (0 none, 1 urgent .. 4 low), assignee, labels, projectId, cycle, milestone, parentId, \
             createdBy, createdAt and updatedAt (ms). With includeRelations also {relations: {parent, children}}.",
            vec![
                req("id", issue_ref("The issue.")),
                opt(
                    "includeRelations",
                    boolean("Also return the parent issue and the child issues."),
                ),
            ],
        ),
        tool(
            "list_issues",
            READ | HISTORY,
            "List issues, filtered by team, state, assignee, label, project, cycle or parent.\n\
             Returns {issues, cursor, hasMore}, most recently updated first unless orderBy is createdAt; \
             pass cursor back for the next page.",
            vec![
                team_filter(),
                opt(
                    "state",
                    string(
                        "A state name (In Progress) or type (backlog, unstarted, started, completed, canceled).",
                    ),
                ),
                opt("assignee", string("Assignee name, or \"me\".")),
                opt("label", string("Only issues carrying this label name.")),
                opt("project", string("Project id or name.")),
                opt("cycle", string("Cycle id, name or number.")),
                opt("parentId", issue_ref("Only sub-issues of this issue.")),
                opt(
                    "query",
                    string("Text the identifier, title or description contains."),
                ),
                limit(),
                page_cursor(),
                opt(
                    "orderBy",
                    one_of(
                        "Sort key, newest first (default updatedAt).",
                        &["createdAt", "updatedAt"],
                    ),
                ),
                opt(
                    "includeArchived",
                    boolean(
                        "Accepted for Linear compatibility; the built-in tracker archives nothing.",
                    ),
                ),
            ],
        ),
        tool(
            "search_issues",
            READ | HISTORY,
            "Search issues by text in the identifier, title or description.\n\
             Returns {issues, cursor, hasMore}, most recently updated first.",
            vec![
                req("query", string("The text to find (case-insensitive).")),
                team_filter(),
                opt("state", string("A state name or type.")),
                limit(),
                page_cursor(),
                opt(
                    "includeArchived",
                    boolean(
                        "Accepted for Linear compatibility; the built-in tracker archives nothing.",
                    ),
                ),
            ],
        ),
        tool(
            "save_issue",
            UPDATE,
            "Create an issue (without id; team and title required) or update one (id).\n\
             Fields left out stay as they are; an empty string clears an optional field. \
             Returns {issue, replayed}.",
            vec![
                opt("id", issue_ref("The issue to update; leave out to create.")),
                opt("team", string("Team key, id or name (required to create).")),
                opt("title", text("Title.", 500)),
                opt("description", clearable("Markdown description.")),
                opt("state", state_prop(true)),
                opt(
                    "priority",
                    integer("0 none, 1 urgent, 2 high, 3 medium, 4 low.", 0, 4),
                ),
                opt(
                    "assignee",
                    clearable("Assignee name, or \"me\"; empty to unassign."),
                ),
                opt(
                    "labels",
                    json!({"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 50,
                           "description": "Label names; replaces the issue's labels."}),
                ),
                opt(
                    "parentId",
                    clearable("Parent issue identifier or id; empty to clear."),
                ),
                opt("project", clearable("Project id or name; empty to clear.")),
                opt(
                    "cycle",
                    clearable("Cycle id, name or number; empty to clear."),
                ),
                opt(
                    "milestone",
                    clearable("Milestone id or name; empty to clear."),
                ),
            ],
        ),
        tool(
            "save_issue_status",
            UPDATE | LEAD,
            "Set an issue's workflow state, completed states included (lead only).\n\
             Returns {issue, replayed}.",
            vec![
                req("id", issue_ref("The issue.")),
                req("state", state_prop(true)),
            ],
        ),
        tool(
            "list_comments",
            READ | HISTORY,
            "List an issue's comments, oldest first.\n\
             Returns {comments: [{id, issueId, body, author, createdAt, updatedAt}]}.",
            vec![req("issueId", issue_ref("The issue.")), limit()],
        ),
        tool(
            "save_comment",
            UPDATE,
            "Add a comment to an issue, or edit one of your comments (id).\n\
             Returns {comment, replayed}.",
            vec![
                opt("id", string("The comment to edit; leave out to add one.")),
                opt("issueId", issue_ref("The issue (required to add).")),
                req("body", text("Markdown body.", 65_536)),
            ],
        ),
        tool(
            "create_comment",
            WRITE,
            "Add a comment to an issue (save_comment without id).\n\
             Returns {comment, replayed}.",
            vec![
                req("issueId", issue_ref("The issue.")),
                req("body", text("Markdown body.", 65_536)),
            ],
        ),
        tool(
            "list_issue_statuses",
            READ,
            "List the workflow states issues can be in.\n\
             Returns {statuses: [{name, type, position}]}; every team has the same states.",
            vec![team_filter()],
        ),
        tool(
            "list_issue_labels",
            READ,
            "List issue labels, workspace-wide and per team.\n\
             Returns {labels: [{id, name, color, description, teamId}]}.",
            vec![
                team_filter(),
                opt("query", string("Text the name contains.")),
                limit(),
            ],
        ),
        tool(
            "save_issue_label",
            UPDATE,
            "Create a label (name; teamId makes it a team label) or update one (id).\n\
             Returns {label, replayed}.",
            vec![
                opt("id", string("The label to update; leave out to create.")),
                opt("name", text("Label name.", 100)),
                opt("color", color()),
                opt("description", clearable("What the label means.")),
                opt(
                    "teamId",
                    string("Team key, id or name; leave out for a workspace label."),
                ),
            ],
        ),
        tool(
            "create_issue_label",
            WRITE,
            "Create a label (save_issue_label without id).\n\
             Returns {label, replayed}.",
            vec![
                req("name", text("Label name.", 100)),
                opt("color", color()),
                opt("description", clearable("What the label means.")),
                opt(
                    "teamId",
                    string("Team key, id or name; leave out for a workspace label."),
                ),
            ],
        ),
    ]
}

fn color() -> Value {
    json!({"type": "string", "pattern": "^#[0-9a-fA-F]{6}$", "description": "Hex color, e.g. #5e6ad2."})
}

fn project_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "get_project",
            READ,
            "Get one project by id or name.\n\
             Returns {project}: id, name, teamId, state, description, lead, targetDate, createdAt, updatedAt.",
            vec![req("query", string("Project id or name."))],
        ),
        tool(
            "list_projects",
            READ,
            "List projects, filtered by team, state or name.\n\
             Returns {projects, cursor, hasMore}, most recently updated first.",
            vec![
                team_filter(),
                opt("state", one_of("Project status.", PROJECT_STATUSES)),
                opt("query", string("Text the name contains.")),
                limit(),
                page_cursor(),
                opt(
                    "includeArchived",
                    boolean(
                        "Accepted for Linear compatibility; the built-in tracker archives nothing.",
                    ),
                ),
            ],
        ),
        tool(
            "save_project",
            UPDATE | LEAD,
            "Create a project (name required) or update one (id) (lead only).\n\
             Returns {project, replayed}.",
            vec![
                opt(
                    "id",
                    string("Project id or name to update; leave out to create."),
                ),
                opt("name", text("Project name, unique in this tracker.", 200)),
                opt("team", string("Team key, id or name.")),
                opt(
                    "state",
                    one_of("Project status (default backlog).", PROJECT_STATUSES),
                ),
                opt("description", clearable("Markdown description.")),
                opt(
                    "lead",
                    clearable("The project lead's name; empty to clear."),
                ),
                opt(
                    "targetDate",
                    json!({"type": "string", "pattern": "^(\\d{4}-\\d{2}-\\d{2})?$",
                           "description": "Target date, YYYY-MM-DD; empty to clear."}),
                ),
            ],
        ),
        tool(
            "list_project_statuses",
            READ,
            "List the statuses a project can be in.\nReturns {statuses: [{name, position}]}.",
            vec![],
        ),
        tool(
            "get_status_updates",
            READ,
            "List project status updates, newest first, for one project or all (or one by id).\n\
             Returns {statusUpdates: [{id, projectId, health, body, author, createdAt, updatedAt}]}.",
            vec![
                opt("projectId", string("Project id or name.")),
                opt("id", string("One status update by id.")),
                limit(),
            ],
        ),
        tool(
            "save_status_update",
            UPDATE,
            "Post a project status update (projectId, health, body) or edit one of yours (id).\n\
             Returns {statusUpdate, replayed}.",
            vec![
                opt(
                    "id",
                    string("The status update to edit; leave out to post one."),
                ),
                opt(
                    "projectId",
                    string("Project id or name (required to post)."),
                ),
                opt("health", one_of("Project health.", HEALTH)),
                opt("body", text("Markdown body.", 65_536)),
            ],
        ),
        tool(
            "list_milestones",
            READ,
            "List project milestones, by target date.\n\
             Returns {milestones: [{id, projectId, name, description, targetDate}]}.",
            vec![opt("project", string("Project id or name.")), limit()],
        ),
        tool(
            "get_milestone",
            READ,
            "Get one project milestone by id.\nReturns {milestone}.",
            vec![req("id", string("Milestone id."))],
        ),
        tool(
            "list_initiatives",
            READ,
            "List initiatives.\n\
             Returns {initiatives: [{id, name, description, status, targetDate}]}.",
            vec![
                opt("query", string("Text the name contains.")),
                opt("status", string("Only initiatives with this status.")),
                limit(),
            ],
        ),
        tool(
            "get_document",
            READ,
            "Get one document by id or title.\n\
             Returns {document: {id, title, content, projectId, issueId, createdBy, createdAt, updatedAt}}.",
            vec![req("id", string("Document id or exact title."))],
        ),
        tool(
            "list_documents",
            READ,
            "List documents, filtered by project, issue or title.\n\
             Returns {documents} without their content, most recently updated first.",
            vec![
                opt("project", string("Project id or name.")),
                opt(
                    "issueId",
                    issue_ref("Only documents attached to this issue."),
                ),
                opt("query", string("Text the title contains.")),
                limit(),
            ],
        ),
    ]
}

fn directory_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "get_user",
            READ,
            "Get a user: \"me\" is you; other names are actors this tracker has seen.\n\
             Returns {user: {id, name, isMe, writes, lastSeenAt}}.",
            vec![req("query", string("\"me\", or a user's name."))],
        ),
        tool(
            "list_users",
            READ,
            "List the users this tracker has seen (writers, assignees) and you.\n\
             Returns {users: [{id, name, isMe, writes, lastSeenAt}]}.",
            vec![opt("query", string("Text the name contains.")), limit()],
        ),
        tool(
            "get_team",
            READ,
            "Get one team by key, id or name.\n\
             Returns {team: {id, key, name, cutOver}}; a cut-over team's issues were imported from Linear.",
            vec![req("query", string("Team key, id or name."))],
        ),
        tool(
            "list_teams",
            READ,
            "List teams.\nReturns {teams: [{id, key, name, cutOver}]}.",
            vec![
                opt("query", string("Text the key or name contains.")),
                limit(),
            ],
        ),
        tool(
            "get_write_receipt",
            READ,
            "Get the recorded result of one of your writes by its idempotency key.\n\
             Returns {receipt: {idempotencyKey, tool, result, createdAt}}.",
            vec![req(
                "idempotencyKey",
                json!({"type": "string", "minLength": 1, "maxLength": 200,
                       "description": "The key you passed to the write."}),
            )],
        ),
        tool(
            "list_audit_events",
            READ,
            "List the audit log of writes, newest first: who (actor, role) called which tool on what.\n\
             Returns {events: [{seq, actor, role, tool, entity, entityId, at}], cursor}; pass cursor for older events.",
            vec![
                opt("actor", string("Only this actor's writes.")),
                opt(
                    "cursor",
                    json!({"type": "integer", "minimum": 0,
                           "description": "Return events older than this seq (from a previous result)."}),
                ),
                limit(),
            ],
        ),
        tool(
            "list_changes",
            READ,
            "List changes (every write, in commit order) after a cursor, waiting up to waitMs for one.\n\
             Returns {changes: [{seq, entity, entityId, action, actor, at}], cursor}; pass cursor back to continue.",
            vec![
                opt(
                    "cursor",
                    json!({"type": "integer", "minimum": 0,
                           "description": "Return changes after this seq (exclusive, default 0)."}),
                ),
                opt(
                    "limit",
                    integer(
                        "At most this many changes (default 100).",
                        1,
                        MAX_CHANGES_LIMIT,
                    ),
                ),
                opt(
                    "waitMs",
                    integer(
                        "When nothing is newer than cursor, wait up to this long for a commit (default 0).",
                        0,
                        MAX_WAIT_MS,
                    ),
                ),
            ],
        ),
    ]
}

fn work_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "post_issue_event",
            WRITE,
            "Record a work event on an issue: claimed, started, blocked, evidence, ready-for-review, reviewed, released or a note.\n\
             Returns {event: {id, issueId, stage, body, evidenceBundleId, actor, createdAt}, replayed}.",
            vec![
                req("issueId", issue_ref("The issue.")),
                req("stage", stage_prop(true)),
                opt("body", clearable("What happened, in Markdown.")),
                opt(
                    "evidenceBundleId",
                    string("An evidence bundle this event points at."),
                ),
            ],
        ),
        tool(
            "list_issue_events",
            READ,
            "List an issue's work events, oldest first.\n\
             Returns {events: [{id, issueId, stage, body, evidenceBundleId, actor, createdAt}]}.",
            vec![
                req("issueId", issue_ref("The issue.")),
                opt("stage", one_of("Only events of this stage.", EVENT_STAGES)),
                limit(),
            ],
        ),
        tool(
            "save_lease",
            WRITE,
            "Claim an issue for a while (a lease), renew your claim, or release it.\n\
             A live lease held by someone else is a conflict until it expires. \
             Returns {lease: {issueId, holder, expiresAt, createdAt, updatedAt} or null, released, replayed}.",
            vec![
                req("issueId", issue_ref("The issue.")),
                opt("holder", string("Who holds the lease (default you).")),
                opt(
                    "ttlMs",
                    integer(
                        &format!("Lease lifetime in ms from now (default {DEFAULT_LEASE_MS})."),
                        MIN_LEASE_MS,
                        MAX_LEASE_MS,
                    ),
                ),
                opt(
                    "release",
                    boolean("Release the lease instead of taking it."),
                ),
            ],
        ),
        tool(
            "list_ready_issues",
            READ,
            "List issues ready to pick up: unstarted (Todo) with no live lease, by priority then age.\n\
             Returns {issues}.",
            vec![team_filter(), limit()],
        ),
        tool(
            "list_drift",
            READ,
            "List issues whose state disagrees with their evidence.\n\
             Returns {drift: [{issue: {id, identifier, title, state}, reason, detail}]}; reasons: \
             started-idle (started, no live lease, no event for 24h), completed-unverified \
             (completed without an owner-verified event), leased-but-closed (a live lease on a completed or canceled issue).",
            vec![team_filter(), limit()],
        ),
        tool(
            "save_run",
            UPDATE,
            "Record a run of work on an issue (issueId, status) or update one (id).\n\
             A finished run (succeeded, failed, canceled) keeps its status. \
             Returns {run: {id, issueId, status, summary, paused, createdBy, createdAt, updatedAt}, replayed}.",
            vec![
                opt(
                    "id",
                    string("The run to update; leave out to record a new one."),
                ),
                opt("issueId", issue_ref("The issue (required for a new run).")),
                opt(
                    "status",
                    one_of("Run status (default queued).", RUN_STATUSES),
                ),
                opt("summary", clearable("What the run did or is doing.")),
            ],
        ),
        tool(
            "list_runs",
            READ,
            "List runs, newest first, for one issue or all.\nReturns {runs}.",
            vec![
                opt("issueId", issue_ref("Only this issue's runs.")),
                opt(
                    "status",
                    one_of("Only runs with this status.", RUN_STATUSES),
                ),
                limit(),
            ],
        ),
        tool(
            "post_run_control",
            UPDATE | LEAD,
            "Pause, resume or cancel a run (lead only).\nReturns {run, replayed}.",
            vec![
                req("runId", string("The run.")),
                req("action", one_of("What to do.", RUN_ACTIONS)),
            ],
        ),
        tool(
            "save_evidence_bundle",
            UPDATE,
            "Record an evidence bundle for an issue (issueId, summary, items) or replace one (id).\n\
             Returns {bundle: {id, issueId, summary, items, createdBy, createdAt, updatedAt}, replayed}.",
            vec![
                opt(
                    "id",
                    string("The bundle to replace; leave out to record one."),
                ),
                opt(
                    "issueId",
                    issue_ref("The issue (required for a new bundle)."),
                ),
                opt("summary", text("What the evidence shows.", 10_000)),
                opt(
                    "items",
                    json!({
                        "type": "array",
                        "maxItems": 100,
                        "description": "The evidence: test runs, logs, screenshots, commits, links.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string", "minLength": 1, "description": "e.g. test, log, screenshot, commit, link."},
                                "ref": {"type": "string", "minLength": 1, "description": "Where it is: a path, URL, commit or receipt."},
                                "note": {"type": "string", "description": "What it shows."}
                            },
                            "required": ["kind", "ref"],
                            "additionalProperties": false
                        }
                    }),
                ),
            ],
        ),
        tool(
            "get_evidence_bundle",
            READ,
            "Get one evidence bundle with its checks.\n\
             Returns {bundle, checks: [{id, bundleId, name, outcome, detail, actor, createdAt}]}.",
            vec![req("id", string("Bundle id."))],
        ),
        tool(
            "post_bundle_check",
            WRITE,
            "Record a check of an evidence bundle: pass or fail, with detail.\n\
             Returns {check, replayed}.",
            vec![
                req("bundleId", string("The bundle.")),
                req("name", text("What was checked.", 200)),
                req("outcome", one_of("The result.", CHECK_OUTCOMES)),
                opt("detail", clearable("Why, in Markdown.")),
            ],
        ),
        tool(
            "post_issue_ask",
            WRITE,
            "Ask the lead a question about an issue; it lands in the lead's inbox.\n\
             Returns {ask: {id, issueId, question, askedBy, createdAt, answer, answeredBy, answeredAt}, replayed}.",
            vec![
                req("issueId", issue_ref("The issue.")),
                req("question", text("The question.", 10_000)),
            ],
        ),
    ]
}

fn plan_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "list_cycles",
            READ,
            "List cycles, by start.\n\
             Returns {cycles: [{id, teamId, number, name, startsAt, endsAt}]}.",
            vec![
                opt("teamId", string("Team key, id or name.")),
                opt(
                    "type",
                    one_of(
                        "Only the current, the previous or the next cycle.",
                        &["current", "previous", "next"],
                    ),
                ),
            ],
        ),
        tool(
            "get_cycle",
            READ,
            "Get one cycle by id.\nReturns {cycle}.",
            vec![req("id", string("Cycle id."))],
        ),
        tool(
            "list_releases",
            READ,
            "List releases, newest first.\n\
             Returns {releases: [{id, name, notes, issueIds, releasedAt, createdBy}]}.",
            vec![limit()],
        ),
        tool(
            "get_release",
            READ,
            "Get one release by id or name.\nReturns {release}.",
            vec![req("id", string("Release id or name."))],
        ),
    ]
}

fn review_id() -> Prop {
    req("reviewId", string("The guided review."))
}

fn review_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "save_guided_review",
            UPDATE,
            "Start a guided review of an issue (a draft of steps for the owner to walk through) or update its title and summary (id).\n\
             Returns {review: {id, issueId, title, summary, state, retiredReason, createdBy, createdAt, updatedAt}, replayed}.",
            vec![
                req("issueId", issue_ref("The issue under review.")),
                opt(
                    "id",
                    string("The review to update; leave out to start one."),
                ),
                req("title", text("Title.", 500)),
                opt("summary", clearable("What the review covers, in Markdown.")),
            ],
        ),
        tool(
            "get_guided_review",
            READ,
            "Get one guided review with its steps.\nReturns {review, steps}.",
            vec![req("id", string("Review id."))],
        ),
        tool(
            "list_guided_reviews",
            READ,
            "List guided reviews, newest first.\nReturns {reviews}.",
            vec![
                opt("issueId", issue_ref("Only reviews of this issue.")),
                opt(
                    "state",
                    one_of("Only reviews in this state.", REVIEW_STATES),
                ),
                limit(),
            ],
        ),
        tool(
            "save_guided_review_step",
            UPDATE,
            "Add a step to a guided review, or edit one (stepId).\n\
             Returns {step: {id, reviewId, position, instruction, expected, evidenceBundleId, outcome, note, resultBy, resultAt}, replayed}.",
            vec![
                review_id(),
                opt("stepId", string("The step to edit; leave out to add one.")),
                req("instruction", text("What the reviewer does.", 10_000)),
                opt("expected", clearable("What the reviewer should see.")),
                opt(
                    "evidenceBundleId",
                    clearable("An evidence bundle for this step; empty to clear."),
                ),
            ],
        ),
        tool(
            "list_guided_review_steps",
            READ,
            "List a guided review's steps in order.\nReturns {steps}.",
            vec![review_id()],
        ),
        tool(
            "post_guided_review_step_result",
            WRITE,
            "Record the outcome of one guided review step: pass, fail or skip.\nReturns {step, replayed}.",
            vec![
                review_id(),
                req("stepId", string("The step.")),
                req("outcome", one_of("The outcome.", STEP_OUTCOMES)),
                opt("note", clearable("What was seen.")),
            ],
        ),
        tool(
            "post_guided_review_comment",
            WRITE,
            "Comment on a guided review.\n\
             Returns {comment: {id, reviewId, body, author, createdAt}, replayed}.",
            vec![review_id(), req("body", text("Markdown body.", 65_536))],
        ),
        tool(
            "list_guided_review_comments",
            READ,
            "List a guided review's comments, oldest first.\nReturns {comments}.",
            vec![review_id()],
        ),
        tool(
            "post_guided_review_submit",
            WRITE,
            "Submit a draft guided review (it needs a step): it becomes ready and lands in the lead's inbox.\n\
             Returns {review, replayed}.",
            vec![review_id()],
        ),
        tool(
            "list_guided_review_events",
            READ,
            "List a guided review's history, oldest first: created, updated, step-added, step-updated, step-result, comment, submitted, retired.\n\
             Returns {events: [{id, reviewId, kind, detail, actor, createdAt}]}.",
            vec![review_id()],
        ),
        tool(
            "post_retire_guided_review",
            WRITE | LEAD,
            "Retire a guided review with a reason (lead only).\nReturns {review, replayed}.",
            vec![
                review_id(),
                req("reason", text("Why it is retired.", 10_000)),
            ],
        ),
    ]
}

fn inbox_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "list_inbox",
            READ | LEAD,
            "List the lead's inbox: open asks, guided reviews ready for the owner, and issues In Review awaiting owner verification (lead only).\n\
             Returns {items: [{id, kind (ask, guided-review, owner-verification), issueId, identifier, title, createdAt, state, snoozeUntil, resolved}]}.",
            vec![
                opt(
                    "includeResolved",
                    boolean("Also list answered asks and archived or snoozed items."),
                ),
                limit(),
            ],
        ),
        tool(
            "get_inbox_item",
            READ | LEAD,
            "Get one inbox item with what it points at (lead only).\n\
             Returns {item, ask | review | issue}.",
            vec![req(
                "id",
                string("Inbox item id (ask:..., review:... or verify:...)."),
            )],
        ),
        tool(
            "save_inbox_item",
            WRITE | LEAD,
            "Mark an inbox item read, snoozed (until snoozeUntil) or archived (lead only).\nReturns {item, replayed}.",
            vec![
                req("id", string("Inbox item id.")),
                req("state", one_of("The new state.", INBOX_STATES)),
                opt(
                    "snoozeUntil",
                    json!({"type": "integer", "minimum": 0,
                           "description": "When a snoozed item returns (ms since the epoch); required to snooze."}),
                ),
            ],
        ),
        tool(
            "post_inbox_answer",
            WRITE | LEAD,
            "Answer an ask from the inbox (lead only): resolves it and records a note event on its issue.\n\
             Returns {ask, event, replayed}.",
            vec![
                req("id", string("The ask's inbox item id (ask:...) or ask id.")),
                req("answer", text("The answer, in Markdown.", 65_536)),
            ],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tools Linear's vocabulary and the amendment require.
    pub(crate) const REQUIRED: &[&str] = &[
        "get_issue",
        "list_issues",
        "search_issues",
        "save_issue",
        "list_comments",
        "save_comment",
        "create_comment",
        "get_project",
        "list_projects",
        "save_project",
        "get_status_updates",
        "save_status_update",
        "get_user",
        "list_users",
        "get_team",
        "list_teams",
        "list_issue_statuses",
        "list_project_statuses",
        "list_issue_labels",
        "save_issue_label",
        "create_issue_label",
        "list_initiatives",
        "get_write_receipt",
        "list_audit_events",
        "post_issue_event",
        "list_issue_events",
        "save_issue_status",
        "list_releases",
        "get_release",
        "list_cycles",
        "get_cycle",
        "save_run",
        "list_runs",
        "save_lease",
        "list_ready_issues",
        "list_drift",
        "list_milestones",
        "get_milestone",
        "get_document",
        "list_documents",
        "save_evidence_bundle",
        "get_evidence_bundle",
        "post_bundle_check",
        "post_issue_ask",
        "post_run_control",
        "list_changes",
        "post_retire_guided_review",
    ];

    const EXTRA: &[&str] = &[
        "save_guided_review",
        "get_guided_review",
        "list_guided_reviews",
        "save_guided_review_step",
        "list_guided_review_steps",
        "post_guided_review_step_result",
        "post_guided_review_comment",
        "list_guided_review_comments",
        "post_guided_review_submit",
        "list_guided_review_events",
        "list_inbox",
        "get_inbox_item",
        "save_inbox_item",
        "post_inbox_answer",
    ];

    const LEAD_ONLY: &[&str] = &[
        "post_run_control",
        "save_issue_status",
        "save_project",
        "post_retire_guided_review",
        "list_inbox",
        "get_inbox_item",
        "save_inbox_item",
        "post_inbox_answer",
    ];

    fn names() -> Vec<&'static str> {
        vocabulary().iter().map(|t| t.name).collect()
    }

    fn enum_of(schema: &Value, prop: &str) -> Vec<String> {
        schema["properties"][prop]["enum"]
            .as_array()
            .expect("an enum")
            .iter()
            .map(|v| v.as_str().expect("a string").to_string())
            .collect()
    }

    #[test]
    fn sixty_one_unique_tools_with_the_required_names() {
        let names = names();
        assert_eq!(names.len(), 61);
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), 61, "names are unique");
        assert_eq!(REQUIRED.len(), 47);
        for n in REQUIRED {
            assert!(find(n).is_some(), "{n} is in the vocabulary");
        }
        let extra: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !REQUIRED.contains(n))
            .collect();
        assert_eq!(extra, EXTRA, "the 14 extra tools");
        assert!(find("linear_get_issue").is_none(), "names are unqualified");
        assert!(find("nope").is_none());
    }

    #[test]
    fn limited_roles_see_fifty_three_tools() {
        for role in [Role::Worker, Role::Reviewer] {
            assert!(role.limited());
            let hidden: Vec<&str> = vocabulary()
                .iter()
                .filter(|d| schema_for(d, role).is_none())
                .map(|d| d.name)
                .collect();
            let mut expected = LEAD_ONLY.to_vec();
            expected.sort_unstable();
            let mut got = hidden.clone();
            got.sort_unstable();
            assert_eq!(got, expected, "{role} hides exactly the lead-only tools");
            assert_eq!(catalog(role).len(), 53);
        }
        for role in [Role::Owner, Role::Lead] {
            assert!(!role.limited());
            assert_eq!(catalog(role).len(), 61);
        }
        let lead_only: Vec<&str> = vocabulary()
            .iter()
            .filter(|d| d.lead_only)
            .map(|d| d.name)
            .collect();
        assert_eq!(lead_only.len(), 8);
    }

    #[test]
    fn every_schema_is_a_closed_object_schema_that_compiles() {
        for role in [Role::Owner, Role::Lead, Role::Reviewer, Role::Worker] {
            for (def, schema) in catalog(role) {
                let name = def.name;
                jsonschema::validator_for(&schema)
                    .unwrap_or_else(|e| panic!("{name} schema compiles: {e}"));
                assert_eq!(schema["type"], "object", "{name}");
                assert_eq!(schema["additionalProperties"], false, "{name}");
                let props = schema["properties"].as_object().expect("properties");
                assert_eq!(props["repo"]["type"], "string", "{name} allows repo");
                for r in schema["required"].as_array().into_iter().flatten() {
                    let r = r.as_str().expect("a name");
                    assert!(props.contains_key(r), "{name}: required {r} is a property");
                }
                // get_write_receipt reads by the key, so it takes one too.
                assert_eq!(
                    props.contains_key("idempotencyKey"),
                    def.write || name == "get_write_receipt",
                    "{name}: idempotencyKey exactly on writes"
                );
                for (_, p) in props {
                    assert!(
                        p["description"].as_str().is_some_and(|d| !d.is_empty()),
                        "{name}: every property is described"
                    );
                }
                let first = def.description.lines().next().unwrap_or("");
                assert!(
                    !first.is_empty() && first.len() <= 200,
                    "{name}: a one-line summary first"
                );
                assert!(
                    def.description.contains("Returns"),
                    "{name} says what it returns"
                );
                // A call with only `repo` and the required arguments is
                // at least shaped right (types aside).
                let v = jsonschema::validator_for(&schema).expect("compiles");
                assert!(
                    !v.is_valid(&serde_json::json!({"repo": "r", "surprise": 1})),
                    "{name} refuses unknown arguments"
                );
            }
        }
        for name in ["get_issue", "list_issues", "search_issues", "list_comments"] {
            let d = find(name).expect("tool");
            assert_eq!(d.schema["properties"]["linearHistory"]["type"], "boolean");
        }
        let save = find("save_issue").expect("save_issue");
        assert!(save.schema["properties"]["ifUpdatedAt"].is_object());
        let changes = find("list_changes").expect("list_changes");
        assert_eq!(changes.schema["properties"]["waitMs"]["maximum"], 20_000);
        assert_eq!(changes.schema["properties"]["limit"]["maximum"], 500);
        assert!(!changes.write);
        assert!(is_write("save_issue") && !is_write("list_changes") && !is_write("unknown"));
    }

    #[test]
    fn limited_schemas_drop_cycle_completed_states_and_owner_verification() {
        let save = find("save_issue").expect("save_issue");
        let event = find("post_issue_event").expect("post_issue_event");
        for role in [Role::Worker, Role::Reviewer] {
            let s = schema_for(save, role).expect("visible");
            assert!(s["properties"].get("cycle").is_none(), "{role}: no cycle");
            let states = enum_of(&s, "state");
            assert!(!states.iter().any(|x| x == "Done"), "{role}: no Done");
            assert!(states.iter().any(|x| x == "In Review"));
            let desc = s["properties"]["state"]["description"]
                .as_str()
                .expect("description");
            assert!(
                !desc.contains("Done"),
                "{role}: the description offers no Done"
            );
            let e = schema_for(event, role).expect("visible");
            let stages = enum_of(&e, "stage");
            assert!(!stages.iter().any(|x| x == "owner-verified"));
            assert!(stages.iter().any(|x| x == "ready-for-review"));
            // The worker's schema refuses what the profile refuses.
            let v = jsonschema::validator_for(&s).expect("compiles");
            assert!(!v.is_valid(&serde_json::json!({"id": "ENG-1", "cycle": "1"})));
            assert!(!v.is_valid(&serde_json::json!({"id": "ENG-1", "state": "Done"})));
            assert!(v.is_valid(&serde_json::json!({"id": "ENG-1", "state": "In Review"})));
        }
        let lead = schema_for(save, Role::Lead).expect("visible");
        assert!(lead["properties"]["cycle"].is_object());
        assert!(enum_of(&lead, "state").iter().any(|x| x == "Done"));
        let lead_event = schema_for(event, Role::Owner).expect("visible");
        assert!(
            enum_of(&lead_event, "stage")
                .iter()
                .any(|x| x == "owner-verified")
        );
    }

    #[test]
    fn check_profile_refuses_limited_roles_only() {
        use serde_json::json;
        let refused: Vec<(&str, Value)> = vec![
            ("save_issue", json!({"id": "ENG-1", "cycle": "C1"})),
            ("save_issue", json!({"id": "ENG-1", "cycle": null})),
            ("save_issue", json!({"id": "ENG-1", "state": "Done"})),
            ("save_issue", json!({"id": "ENG-1", "state": "done"})),
            (
                "post_issue_event",
                json!({"issueId": "ENG-1", "stage": "owner-verified"}),
            ),
        ];
        let allowed: Vec<(&str, Value)> = vec![
            ("save_issue", json!({"id": "ENG-1", "state": "In Review"})),
            ("save_issue", json!({"team": "ENG", "title": "t"})),
            (
                "post_issue_event",
                json!({"issueId": "ENG-1", "stage": "ready-for-review"}),
            ),
            ("list_changes", json!({})),
            ("no_such_tool", json!({})),
        ];
        for role in [Role::Worker, Role::Reviewer] {
            for tool in LEAD_ONLY {
                let r = check_profile(tool, role, &json!({})).expect_err("refused");
                assert_eq!(r.role, role);
                assert_eq!(r.tool, *tool);
                assert_eq!(
                    r.what,
                    format!("{tool} is not available to the {role} role")
                );
            }
            for (tool, args) in &refused {
                let r = check_profile(tool, role, args).expect_err("refused");
                assert!(r.what.contains(role.as_str()), "{}", r.what);
                assert_eq!(r.to_string(), r.what);
            }
            for (tool, args) in &allowed {
                assert_eq!(check_profile(tool, role, args), Ok(()), "{tool} {args}");
            }
        }
        for role in [Role::Owner, Role::Lead] {
            for def in vocabulary() {
                assert_eq!(check_profile(def.name, role, &json!({})), Ok(()));
            }
            for (tool, args) in refused.iter().chain(allowed.iter()) {
                assert_eq!(check_profile(tool, role, args), Ok(()), "{role} {tool}");
            }
        }
        assert_eq!(Refusal::CODE, "role_not_allowed");
    }

    #[test]
    fn catalog_sizes() {
        let lead = schema_bytes(Role::Lead);
        let owner = schema_bytes(Role::Owner);
        let worker = schema_bytes(Role::Worker);
        let reviewer = schema_bytes(Role::Reviewer);
        println!(
            "catalog bytes: lead {lead} (~{} tokens), worker {worker} (~{} tokens)",
            lead / 4,
            worker / 4
        );
        assert_eq!(lead, owner);
        assert_eq!(worker, reviewer);
        assert!(worker < lead);
        assert!(worker > 0);
    }

    #[test]
    fn states_and_roles() {
        assert_eq!(state_type("in review"), Some(("In Review", "started")));
        assert!(is_completed_state("DONE"));
        assert!(!is_completed_state("Canceled"));
        assert!(!is_completed_state("nonsense"));
        for r in [Role::Owner, Role::Lead, Role::Reviewer, Role::Worker] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
            assert_eq!(
                serde_json::to_value(r).expect("json"),
                Value::from(r.as_str())
            );
        }
    }
}
