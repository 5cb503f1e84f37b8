//! The tool dispatcher: runs one vocabulary tool against the store.
//!
//! The host has already resolved the caller's role, checked its profile and
//! validated the arguments against the role's schema. This layer still
//! refuses profile violations itself ([`StoreError::NotAllowed`]) and parses
//! arguments strictly (unknown fields are invalid) after dropping the
//! routing-only `repo` and `linearHistory`. Results are always JSON objects;
//! every write result carries `replayed`.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value, json};

pub use crate::store::Caller;
use crate::store::{
    IssueQuery, LeaseSlot, PostBundleCheck, PostInboxAnswer, PostIssueAsk, PostIssueEvent,
    PostReviewComment, PostStepResult, ProjectQuery, RetireReview, ReviewRef, RunControl,
    SaveComment, SaveEvidenceBundle, SaveGuidedReview, SaveGuidedReviewStep, SaveInboxItem,
    SaveIssue, SaveIssueStatus, SaveLabel, SaveLease, SaveProject, SaveRun, SaveStatusUpdate,
    Store, StoreError, Written,
};
use crate::vocabulary::{self, Family, MAX_CHANGES_LIMIT, MAX_WAIT_MS, PROJECT_STATUSES, STATES};

mod args;
mod directory;
mod inbox;
mod issues;
mod plan;
mod projects;
mod review;
mod work;

use args::*;

/// Keys the host uses for routing; the store ignores them.
const ROUTING_KEYS: &[&str] = &["repo", "linearHistory"];

/// Runs one tool as `caller`. `args` is the JSON object the caller sent.
pub fn invoke(
    store: &mut Store,
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    let (def, args) = checked(caller, tool, args)?;
    match def.family {
        Family::Issues => issues::invoke(store, caller, tool, args),
        Family::Projects => projects::invoke(store, caller, tool, args),
        Family::Plan => plan::invoke(store, caller, tool, args),
        Family::Directory => directory::invoke(store, caller, tool, args),
        Family::Work => work::invoke(store, caller, tool, args),
        Family::Review => review::invoke(store, caller, tool, args),
        Family::Inbox => inbox::invoke(store, caller, tool, args),
    }
}

/// Runs one tool of a saved Linear route that the store holds for it: only
/// `save_lease` (Linear keeps no leases; everything else goes to Linear).
pub fn invoke_route(
    store: &mut Store,
    caller: &Caller,
    slot: &LeaseSlot,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    if tool != "save_lease" {
        return Err(StoreError::Invalid(format!(
            "a Linear route keeps only its leases here; {tool} goes to Linear"
        )));
    }
    let (_, args) = checked(caller, tool, args)?;
    let a: SaveLease = parse(tool, args)?;
    flat(store.save_lease_in(caller, slot, a)?)
}

/// A tool's definition and its arguments without the routing keys, once
/// the caller's profile allows them.
fn checked(
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<(&'static vocabulary::ToolDef, Value), StoreError> {
    let mut args = match args {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        _ => {
            return Err(StoreError::Invalid(format!(
                "arguments for {tool} must be a JSON object"
            )));
        }
    };
    for k in ROUTING_KEYS {
        args.remove(*k);
    }
    let args = Value::Object(args);
    let Some(def) = vocabulary::find(tool) else {
        return Err(StoreError::Invalid(format!("unknown tool {tool}")));
    };
    vocabulary::check_profile(tool, caller.role, &args).map_err(|r| StoreError::NotAllowed {
        role: r.role,
        what: r.what,
    })?;
    Ok((def, args))
}

/// A vocabulary tool its family's dispatcher does not run.
fn no_implementation(tool: &str) -> StoreError {
    StoreError::Invalid(format!("tool {tool} has no store implementation"))
}

/// Parses a tool's arguments strictly.
fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, StoreError> {
    serde_json::from_value(args)
        .map_err(|e| StoreError::Invalid(format!("arguments for {tool}: {e}")))
}

/// `{key: value, replayed}`.
fn written<T: Serialize>(key: &str, w: Written<T>) -> Result<Value, StoreError> {
    Ok(json!({ key: serde_json::to_value(w.value)?, "replayed": w.replayed }))
}

/// The value's own fields plus `replayed`.
fn flat<T: Serialize>(w: Written<T>) -> Result<Value, StoreError> {
    let mut out = match serde_json::to_value(w.value)? {
        Value::Object(m) => m,
        other => {
            let mut m = Map::new();
            m.insert("value".into(), other);
            m
        }
    };
    out.insert("replayed".into(), w.replayed.into());
    Ok(Value::Object(out))
}

fn issues_page(page: crate::store::Page<crate::store::Issue>) -> Result<Value, StoreError> {
    Ok(json!({"issues": page.items, "cursor": page.cursor, "hasMore": page.has_more}))
}

fn limit(l: Option<i64>) -> usize {
    l.unwrap_or(50).clamp(1, vocabulary::MAX_LIMIT) as usize
}

#[cfg(test)]
mod tests;
