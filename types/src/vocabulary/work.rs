//! The work loop: events, evidence, asks, leases and runs.

use super::*;

pub(super) fn work_tools() -> Vec<ToolDef> {
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
