//! Each fleet tool's arguments, as a member sends them, and the input
//! schema a member lists: derived from these types, so the schema and the
//! parse cannot disagree. A field the tool does not know refuses the call
//! (`additionalProperties: false`); each bound comes from [`super::limits`].
//!
//! A field's doc comment is its description in the schema: it is written
//! for the model that calls the tool.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::limits::{
    DESCRIBED_TOOLS, MESSAGE_TEXT, RECEIPT_ID, SEARCH_QUERY, TOOL_NAME, WAKE_NOTE,
};

/// `clankie_tools`: a search (`query`) or a description (`names`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolsArgs {
    /// Words to search names and descriptions for; omit for the first page.
    #[schemars(length(max = SEARCH_QUERY))]
    pub query: Option<String>,
    /// Qualified names whose full input schemas to return.
    #[schemars(length(max = DESCRIBED_TOOLS), inner(length(max = TOOL_NAME)))]
    pub names: Option<Vec<String>>,
}

/// `clankie_call`: a call by name, or with a receipt id alone, the
/// reconciliation of an earlier one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(extend("anyOf" = [{ "required": ["name"] }, { "required": ["receiptId"] }]))]
pub struct CallArgs {
    /// Qualified tool name from clankie_tools.
    #[schemars(length(max = TOOL_NAME))]
    pub name: Option<String>,
    /// Arguments matching the tool's input schema.
    #[schemars(with = "Option<Map<String, Value>>")]
    pub arguments: Option<Value>,
    /// Alone: read that receipt. With name: use this id for the new call's receipt.
    #[schemars(length(max = RECEIPT_ID))]
    pub receipt_id: Option<String>,
    /// Marks a call made outside an interactive turn.
    #[serde(default)]
    pub background: bool,
}

/// `message_clankie`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReportArgs {
    #[schemars(length(min = 1, max = MESSAGE_TEXT))]
    pub text: String,
    /// Chosen by the bridge before sending; reuse it only to read the original delivery.
    #[schemars(length(max = RECEIPT_ID))]
    pub receipt_id: Option<String>,
}

/// `list_fleet_seats` and `get_wake`: no arguments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// `message_peer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PeerArgs {
    /// A seatId from list_fleet_seats.
    pub seat: String,
    #[schemars(length(min = 1, max = MESSAGE_TEXT))]
    pub text: String,
    #[schemars(length(max = RECEIPT_ID))]
    pub receipt_id: Option<String>,
}

/// `submit_for_review`, which the bridge carries out: it reads the change
/// from the checkout named and sends a [`Submission`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubmitArgs {
    /// Absolute path inside the git checkout.
    pub checkout: String,
    #[schemars(length(min = 1))]
    pub summary: String,
    pub issue: Option<String>,
    pub evidence: Option<String>,
    /// A commit to diff from instead of the merge base with origin/main.
    pub base: Option<String>,
}

/// `review_candidate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CandidateArgs {
    pub candidate_id: String,
}

/// `review_verdict`, and the body of `POST …/review-verdicts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerdictArgs {
    pub candidate_id: String,
    pub patch_id: String,
    #[schemars(extend("enum" = ["approve", "changes"]))]
    pub verdict: String,
    #[serde(default)]
    pub findings: Vec<Finding>,
    #[serde(default)]
    pub summary: String,
}

/// One concrete finding of a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Finding {
    #[schemars(length(min = 1))]
    pub text: String,
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub line: u32,
}

/// `schedule_wake`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScheduleWakeArgs {
    #[schemars(range(min = 0))]
    pub at_ms: i64,
    #[serde(default)]
    #[schemars(length(max = WAKE_NOTE))]
    pub note: String,
}

/// The body of `POST …/review-candidates`: the change the bridge read from
/// the checkout `submit_for_review` named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Submission {
    pub checkout: String,
    pub head: String,
    pub base: String,
    pub patch_id: String,
    /// base64 of `git diff --binary BASE HEAD`.
    pub patch: String,
    pub summary: String,
    #[serde(default)]
    pub issue: String,
    #[serde(default)]
    pub evidence: String,
}

/// The input schema of a tool whose arguments are `T`: an object schema,
/// every subschema inline, optional fields plain (absent, never `null`),
/// with no title or description of its own (the tool has those).
pub fn input_schema<T: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
        root.remove("description");
        // Some clients read an object schema's properties unconditionally.
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    plain(&mut schema);
    schema
}

/// What the derive adds that a model does not need and some providers
/// refuse: `null` in a type list (`Option<T>`: a member leaves the field
/// out instead), Rust's integer `format`s, and serde's defaults.
fn plain(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::Array(types)) = o.get("type") {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                if kept.len() == 1 {
                    o.insert("type".into(), kept[0].clone());
                }
            }
            if o.get("type").is_some_and(|t| t == "integer") {
                o.remove("format");
            }
            o.remove("default");
            // `properties` maps names to schemas: a property called
            // `default` or `format` is a name, not a keyword.
            for (key, child) in o.iter_mut() {
                if key == "properties" {
                    if let Value::Object(props) = child {
                        props.values_mut().for_each(plain);
                    }
                } else {
                    plain(child);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(plain),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::FleetTool;

    #[test]
    fn the_derived_schemas_are_the_golden_ones() {
        let golden = super::super::fixture("schemas.json");
        let golden = golden.as_object().expect("object");
        assert_eq!(golden.len(), FleetTool::ALL.len());
        for t in FleetTool::ALL {
            assert_eq!(t.input_schema(), golden[t.name()], "{t}");
        }
    }

    #[test]
    fn every_schema_is_a_closed_object_that_compiles_and_holds_its_bounds() {
        for t in FleetTool::ALL {
            let schema = t.input_schema();
            assert_eq!(schema["type"], "object", "{t}");
            assert_eq!(schema["additionalProperties"], false, "{t}");
            assert!(!schema.to_string().contains("null"), "{t}: {schema}");
            assert!(!schema.to_string().contains("$ref"), "{t}: {schema}");
            jsonschema::validator_for(&schema).expect("compiles");
        }
        let report = FleetTool::Report.input_schema();
        let v = jsonschema::validator_for(&report).expect("compiles");
        assert!(v.is_valid(&serde_json::json!({ "text": "done" })));
        assert!(!v.is_valid(&serde_json::json!({ "text": "" })));
        assert!(!v.is_valid(&serde_json::json!({ "text": "x".repeat(MESSAGE_TEXT + 1) })));
        assert!(!v.is_valid(&serde_json::json!({ "text": "x", "to": "lead" })));
        let call = FleetTool::Call.input_schema();
        let v = jsonschema::validator_for(&call).expect("compiles");
        assert!(v.is_valid(&serde_json::json!({ "receiptId": "r-1" })));
        assert!(!v.is_valid(&serde_json::json!({ "background": true })));
    }
}
