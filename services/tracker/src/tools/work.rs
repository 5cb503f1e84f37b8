//! The work loop: issue events, leases, ready work, drift, runs, evidence bundles, asks.

use super::*;

pub(super) fn invoke(
    store: &mut Store,
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    match tool {
        "post_issue_event" => {
            let a: PostIssueEvent = parse(tool, args)?;
            written("event", store.post_issue_event(caller, a)?)
        }
        "list_issue_events" => {
            let a: ListIssueEvents = parse(tool, args)?;
            let events = store.issue_events(&a.issue_id, a.stage.as_deref(), a.limit)?;
            Ok(json!({ "events": events }))
        }
        "save_lease" => {
            let a: SaveLease = parse(tool, args)?;
            flat(store.save_lease(caller, a)?)
        }
        "list_ready_issues" => {
            let a: TeamLimit = parse(tool, args)?;
            Ok(json!({"issues": store.ready_issues(a.team.as_deref(), a.limit)?}))
        }
        "list_drift" => {
            let a: TeamLimit = parse(tool, args)?;
            Ok(json!({"drift": store.drift(a.team.as_deref(), a.limit)?}))
        }
        "save_run" => {
            let a: SaveRun = parse(tool, args)?;
            written("run", store.save_run(caller, a)?)
        }
        "list_runs" => {
            let a: ListRuns = parse(tool, args)?;
            let runs = store.runs(a.issue_id.as_deref(), a.status.as_deref(), a.limit)?;
            Ok(json!({ "runs": runs }))
        }
        "post_run_control" => {
            let a: RunControl = parse(tool, args)?;
            written("run", store.post_run_control(caller, a)?)
        }
        "save_evidence_bundle" => {
            let a: SaveEvidenceBundle = parse(tool, args)?;
            written("bundle", store.save_evidence_bundle(caller, a)?)
        }
        "get_evidence_bundle" => {
            let a: Id = parse(tool, args)?;
            let bundle = store.evidence_bundle(&a.id)?;
            let checks = store.bundle_checks(&bundle.id)?;
            Ok(json!({ "bundle": bundle, "checks": checks }))
        }
        "post_bundle_check" => {
            let a: PostBundleCheck = parse(tool, args)?;
            written("check", store.post_bundle_check(caller, a)?)
        }
        "post_issue_ask" => {
            let a: PostIssueAsk = parse(tool, args)?;
            written("ask", store.post_issue_ask(caller, a)?)
        }
        other => Err(no_implementation(other)),
    }
}
