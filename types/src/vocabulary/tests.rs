//! The vocabulary's own checks: counts, names, closed schemas, profiles.

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
