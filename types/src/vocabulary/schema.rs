//! Schema builders: properties, the common argument shapes, and `tool`, which
//! closes each schema and adds the routing, idempotency, concurrency and
//! history arguments its flags call for.

use super::*;

pub(super) struct Prop {
    name: &'static str,
    required: bool,
    schema: Value,
}

pub(super) fn req(name: &'static str, schema: Value) -> Prop {
    Prop {
        name,
        required: true,
        schema,
    }
}

pub(super) fn opt(name: &'static str, schema: Value) -> Prop {
    Prop {
        name,
        required: false,
        schema,
    }
}

pub(super) fn string(desc: &str) -> Value {
    json!({"type": "string", "minLength": 1, "description": desc})
}

/// A string that may be empty (to clear a field).
pub(super) fn clearable(desc: &str) -> Value {
    json!({"type": "string", "description": desc})
}

pub(super) fn text(desc: &str, max: u32) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max, "description": desc})
}

pub(super) fn boolean(desc: &str) -> Value {
    json!({"type": "boolean", "description": desc})
}

pub(super) fn integer(desc: &str, min: i64, max: i64) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max, "description": desc})
}

pub(super) fn one_of(desc: &str, values: &[&str]) -> Value {
    json!({"type": "string", "enum": values, "description": desc})
}

pub(super) fn limit() -> Prop {
    opt(
        "limit",
        integer(
            &format!("At most this many results (default {DEFAULT_LIMIT})."),
            1,
            MAX_LIMIT,
        ),
    )
}

pub(super) fn page_cursor() -> Prop {
    opt(
        "cursor",
        string("The cursor from the previous page's result, to read the next page."),
    )
}

pub(super) fn team_filter() -> Prop {
    opt("team", string("Team key, id or name."))
}

pub(super) fn issue_ref(desc: &str) -> Value {
    string(&format!(
        "{desc} Issue identifier (TEAM-n or LOCAL-TEAM-n), UUID or Linear UUID."
    ))
}

pub(super) fn state_prop(include_completed: bool) -> Value {
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

pub(super) fn stage_prop(include_owner_verified: bool) -> Value {
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

pub(super) fn tool(name: &'static str, flags: u8, description: &str, props: Vec<Prop>) -> ToolDef {
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
        // `build` sets it from the file that made the tool.
        family: Family::Issues,
    }
}

pub(super) fn color() -> Value {
    json!({"type": "string", "pattern": "^#[0-9a-fA-F]{6}$", "description": "Hex color, e.g. #5e6ad2."})
}

pub(super) fn review_id() -> Prop {
    req("reviewId", string("The guided review."))
}
