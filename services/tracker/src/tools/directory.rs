//! The directory and the logs: users, teams, write receipts, audit events, changes.

use super::*;

pub(super) fn invoke(
    store: &mut Store,
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    let me = caller.actor.as_str();
    match tool {
        "get_user" => {
            let a: Query = parse(tool, args)?;
            Ok(json!({"user": store.user(me, &a.query)?}))
        }
        "list_users" => {
            let a: QueryLimit = parse(tool, args)?;
            Ok(json!({"users": store.users(me, a.query.as_deref(), a.limit)?}))
        }
        "get_team" => {
            let a: Query = parse(tool, args)?;
            Ok(json!({"team": store.team(&a.query)?}))
        }
        "list_teams" => {
            let a: QueryLimit = parse(tool, args)?;
            Ok(json!({"teams": store.teams(a.query.as_deref(), a.limit)?}))
        }
        "get_write_receipt" => {
            let a: GetReceipt = parse(tool, args)?;
            Ok(json!({"receipt": store.write_receipt(me, &a.idempotency_key)?}))
        }
        "list_audit_events" => {
            let a: ListAudit = parse(tool, args)?;
            let events = store.audit_events(a.actor.as_deref(), a.cursor, a.limit)?;
            let cursor = events.last().map(|e| e.seq);
            Ok(json!({ "events": events, "cursor": cursor }))
        }
        "list_changes" => {
            let a: ListChanges = parse(tool, args)?;
            let after = a.cursor.unwrap_or(0);
            if after < 0 {
                return Err(StoreError::Invalid("cursor is 0 or more".into()));
            }
            let n = a.limit.unwrap_or(100);
            if !(1..=MAX_CHANGES_LIMIT).contains(&n) {
                return Err(StoreError::Invalid(format!(
                    "limit is 1 to {MAX_CHANGES_LIMIT}"
                )));
            }
            if let Some(w) = a.wait_ms
                && !(0..=MAX_WAIT_MS).contains(&w)
            {
                return Err(StoreError::Invalid(format!("waitMs is 0 to {MAX_WAIT_MS}")));
            }
            let changes = store.changes(after, n as usize)?;
            let cursor = changes.last().map_or(after, |c| c.seq);
            Ok(json!({ "changes": changes, "cursor": cursor }))
        }
        other => Err(no_implementation(other)),
    }
}
