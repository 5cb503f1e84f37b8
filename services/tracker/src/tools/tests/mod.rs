//! The dispatcher's tests, one file per domain, on a real store in a
//! temporary folder.

mod inbox;
mod issues;
mod plan;
mod review;
mod work;

use super::*;

use crate::vocabulary::Role;

struct Fx {
    _dir: tempfile::TempDir,
    store: Store,
    lead: Caller,
    owner: Caller,
    w1: Caller,
    w2: Caller,
    reviewer: Caller,
}

fn fx() -> Fx {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = Store::open(&dir.path().join("tracker")).expect("open");
    store
        .create_team("ENG", "Engineering", "clankie")
        .expect("team");
    Fx {
        _dir: dir,
        store,
        lead: Caller::new("clankie", Role::Lead),
        owner: Caller::new("james", Role::Owner),
        w1: Caller::new("w1", Role::Worker),
        w2: Caller::new("w2", Role::Worker),
        reviewer: Caller::new("rev", Role::Reviewer),
    }
}

/// Calls a tool the way the host does: the arguments must match the
/// schema the caller's role sees, then the store runs it.
fn call(store: &mut Store, caller: &Caller, tool: &str, args: Value) -> Result<Value, StoreError> {
    let def = vocabulary::find(tool).expect("a vocabulary tool");
    let schema = vocabulary::schema_for(def, caller.role).expect("visible to the role");
    let v = jsonschema::validator_for(&schema).expect("compiles");
    if let Err(e) = v.validate(&args) {
        panic!(
            "{tool} {args} does not match its schema for {}: {e}",
            caller.role
        );
    }
    invoke(store, caller, tool, args)
}

fn ok(store: &mut Store, caller: &Caller, tool: &str, args: Value) -> Value {
    call(store, caller, tool, args.clone())
        .unwrap_or_else(|e| panic!("{tool} {args} as {}: {e}", caller.actor))
}

/// Files an ENG issue titled "t" as `caller`; returns its id.
fn issue(store: &mut Store, caller: &Caller) -> String {
    let created = ok(
        store,
        caller,
        "save_issue",
        json!({"team": "ENG", "title": "t"}),
    );
    s(&created["issue"]["id"])
}

fn s(v: &Value) -> String {
    v.as_str().expect("a string").to_string()
}

fn not_allowed(r: Result<Value, StoreError>, role: Role) -> String {
    match r {
        Err(StoreError::NotAllowed { role: r, what }) => {
            assert_eq!(r, role);
            assert!(what.contains(role.as_str()), "{what}");
            what
        }
        other => panic!("expected NotAllowed, got {other:?}"),
    }
}
