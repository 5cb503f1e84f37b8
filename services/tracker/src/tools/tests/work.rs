//! The work loop: leases, events, evidence, checks and runs.

use super::*;

#[test]
fn leases_conflict_until_they_expire() {
    let mut f = fx();
    let st = &mut f.store;
    for (title, priority) in [("low", 4), ("none", 0), ("urgent", 1)] {
        ok(
            st,
            &f.lead,
            "save_issue",
            json!({"team": "ENG", "title": title, "state": "Todo", "priority": priority}),
        );
    }
    ok(
        st,
        &f.lead,
        "save_issue",
        json!({"team": "ENG", "title": "backlog"}),
    );
    let ready = ok(st, &f.w1, "list_ready_issues", json!({"team": "ENG"}));
    let order: Vec<String> = ready["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .map(|i| s(&i["title"]))
        .collect();
    assert_eq!(order, ["urgent", "low", "none"]);

    let taken = ok(
        st,
        &f.w1,
        "save_lease",
        json!({"issueId": "ENG-3", "ttlMs": 60000}),
    );
    assert_eq!(taken["lease"]["holder"], "w1");
    assert_eq!(taken["released"], false);
    let ready = ok(st, &f.w2, "list_ready_issues", json!({}));
    assert_eq!(
        ready["issues"][0]["title"], "low",
        "a leased issue is not ready"
    );
    assert!(matches!(
        call(
            st,
            &f.w2,
            "save_lease",
            json!({"issueId": "ENG-3", "ttlMs": 60000})
        ),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        call(
            st,
            &f.w2,
            "save_lease",
            json!({"issueId": "ENG-3", "release": true})
        ),
        Err(StoreError::Conflict(_))
    ));
    not_allowed(
        call(
            st,
            &f.w2,
            "save_lease",
            json!({"issueId": "ENG-1", "holder": "w1"}),
        ),
        Role::Worker,
    );
    // Renewing keeps the lease's start.
    let renewed = ok(
        st,
        &f.w1,
        "save_lease",
        json!({"issueId": "ENG-3", "ttlMs": 60000}),
    );
    assert_eq!(renewed["lease"]["createdAt"], taken["lease"]["createdAt"]);

    st.advance_clock(60_001);
    let stolen = ok(
        st,
        &f.w2,
        "save_lease",
        json!({"issueId": "ENG-3", "ttlMs": 1000}),
    );
    assert_eq!(stolen["lease"]["holder"], "w2");
    assert!(matches!(
        call(
            st,
            &f.w1,
            "save_lease",
            json!({"issueId": "ENG-3", "release": true})
        ),
        Err(StoreError::Conflict(_))
    ));
    let released = ok(
        st,
        &f.w2,
        "save_lease",
        json!({"issueId": "ENG-3", "release": true}),
    );
    assert_eq!(released["released"], true);
    assert_eq!(released["lease"], Value::Null);
    assert!(st.lease("ENG-3").expect("lease").is_none());
    let nothing = ok(
        st,
        &f.w2,
        "save_lease",
        json!({"issueId": "ENG-3", "release": true}),
    );
    assert_eq!(nothing["released"], false);
    assert!(matches!(
        invoke(
            st,
            &f.w1,
            "save_lease",
            json!({"issueId": "ENG-3", "ttlMs": 10})
        ),
        Err(StoreError::Invalid(_))
    ));
}

#[test]
fn events_evidence_and_checks() {
    let mut f = fx();
    let st = &mut f.store;
    issue(st, &f.w1);
    ok(
        st,
        &f.w1,
        "save_issue",
        json!({"team": "ENG", "title": "other"}),
    );
    let b = ok(
        st,
        &f.w1,
        "save_evidence_bundle",
        json!({"issueId": "ENG-1", "summary": "tests pass",
               "items": [{"kind": "test", "ref": "cargo test -p x", "note": "42 passed"},
                         {"kind": "commit", "ref": "abc123"}]}),
    );
    let bid = s(&b["bundle"]["id"]);
    assert_eq!(b["bundle"]["items"][1]["ref"], "abc123");
    ok(
        st,
        &f.reviewer,
        "post_bundle_check",
        json!({"bundleId": bid, "name": "reran tests", "outcome": "pass"}),
    );
    ok(
        st,
        &f.reviewer,
        "post_bundle_check",
        json!({"bundleId": bid, "name": "screenshot", "outcome": "fail", "detail": "blurry"}),
    );
    let got = ok(st, &f.w2, "get_evidence_bundle", json!({"id": bid}));
    let outcomes: Vec<String> = got["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| s(&c["outcome"]))
        .collect();
    assert_eq!(outcomes, ["pass", "fail"]);
    let replaced = ok(
        st,
        &f.w1,
        "save_evidence_bundle",
        json!({"id": bid, "summary": "tests pass, screenshot retaken",
               "ifUpdatedAt": b["bundle"]["updatedAt"].clone()}),
    );
    assert_eq!(
        replaced["bundle"]["items"].as_array().expect("items").len(),
        2
    );
    assert!(matches!(
        call(
            st,
            &f.w1,
            "post_issue_event",
            json!({"issueId": "ENG-2", "stage": "evidence", "evidenceBundleId": bid})
        ),
        Err(StoreError::Invalid(_))
    ));
    for stage in ["claimed", "started", "evidence", "ready-for-review"] {
        let mut args = json!({"issueId": "ENG-1", "stage": stage});
        if stage == "evidence" {
            args["evidenceBundleId"] = Value::from(bid.clone());
        }
        ok(st, &f.w1, "post_issue_event", args);
    }
    let events = ok(st, &f.w2, "list_issue_events", json!({"issueId": "ENG-1"}));
    let stages: Vec<String> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| s(&e["stage"]))
        .collect();
    assert_eq!(
        stages,
        ["claimed", "started", "evidence", "ready-for-review"]
    );
    assert_eq!(events["events"][2]["evidenceBundleId"], Value::from(bid));
    let only = ok(
        st,
        &f.w2,
        "list_issue_events",
        json!({"issueId": "ENG-1", "stage": "started"}),
    );
    assert_eq!(only["events"].as_array().expect("events").len(), 1);
}

#[test]
fn runs_and_run_control() {
    let mut f = fx();
    let st = &mut f.store;
    issue(st, &f.w1);
    let run = ok(
        st,
        &f.w1,
        "save_run",
        json!({"issueId": "ENG-1", "summary": "building"}),
    );
    let id = s(&run["run"]["id"]);
    assert_eq!(run["run"]["status"], "queued");
    ok(
        st,
        &f.w1,
        "save_run",
        json!({"id": id, "status": "running"}),
    );
    not_allowed(
        invoke(
            st,
            &f.w1,
            "post_run_control",
            json!({"runId": id, "action": "cancel"}),
        ),
        Role::Worker,
    );
    let paused = ok(
        st,
        &f.lead,
        "post_run_control",
        json!({"runId": id, "action": "pause"}),
    );
    assert_eq!(paused["run"]["paused"], true);
    let resumed = ok(
        st,
        &f.lead,
        "post_run_control",
        json!({"runId": id, "action": "resume"}),
    );
    assert_eq!(resumed["run"]["paused"], false);
    let canceled = ok(
        st,
        &f.lead,
        "post_run_control",
        json!({"runId": id, "action": "cancel"}),
    );
    assert_eq!(canceled["run"]["status"], "canceled");
    assert!(matches!(
        call(
            st,
            &f.w1,
            "save_run",
            json!({"id": id, "status": "running"})
        ),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        call(
            st,
            &f.lead,
            "post_run_control",
            json!({"runId": id, "action": "resume"})
        ),
        Err(StoreError::Conflict(_))
    ));
    let summary = ok(
        st,
        &f.w1,
        "save_run",
        json!({"id": id, "summary": "stopped by the lead"}),
    );
    assert_eq!(summary["run"]["status"], "canceled");
    ok(
        st,
        &f.w2,
        "save_run",
        json!({"issueId": "ENG-1", "status": "succeeded"}),
    );
    let runs = ok(st, &f.w2, "list_runs", json!({"issueId": "ENG-1"}));
    assert_eq!(runs["runs"].as_array().expect("runs").len(), 2);
    let ok_runs = ok(st, &f.w2, "list_runs", json!({"status": "succeeded"}));
    assert_eq!(ok_runs["runs"][0]["createdBy"], "w2");
}

/// A saved Linear route's leases live apart from the built-in issues: the
/// reference stays as observed (never resolved to a built-in issue, even
/// one with the same key), each connected resource keeps its own, they
/// conflict and release like any lease, and only `save_lease` is held.
#[test]
fn route_leases_keep_their_resource_and_reference() {
    let mut f = fx();
    let st = &mut f.store;
    ok(
        st,
        &f.lead,
        "save_issue",
        json!({"team": "ENG", "title": "same key"}),
    );
    let a = LeaseSlot::Route {
        resource: "user:u/workspace:a".into(),
        project: "beta".into(),
    };
    let b = LeaseSlot::Route {
        resource: "user:u/workspace:b".into(),
        project: "beta".into(),
    };
    let lease = |id: &str| json!({"issueId": id, "ttlMs": 60000});
    let taken = invoke_route(st, &f.w1, &a, "save_lease", lease("ENG-1")).expect("taken");
    assert_eq!(taken["lease"]["issueId"], "ENG-1");
    assert!(
        st.lease("ENG-1").expect("built-in").is_none(),
        "not the built-in issue"
    );
    // Another worker conflicts in the same resource, not in another.
    let r = invoke_route(st, &f.w2, &a, "save_lease", lease("ENG-1"));
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    invoke_route(st, &f.w2, &b, "save_lease", lease("ENG-1")).expect("another resource");
    assert_eq!(
        st.route_leases_held_by("w1", "beta").expect("held"),
        [("user:u/workspace:a".to_string(), "ENG-1".to_string())]
    );
    let owned = st.lease_ownership().expect("ownership");
    assert_eq!(
        owned,
        [
            (
                "linear:user:u/workspace:a:beta".to_string(),
                "w1".to_string(),
                1
            ),
            (
                "linear:user:u/workspace:b:beta".to_string(),
                "w2".to_string(),
                1
            ),
        ]
    );
    // Everything else on a route goes to Linear.
    let r = invoke_route(
        st,
        &f.w1,
        &a,
        "save_issue",
        json!({"team": "ENG", "title": "x"}),
    );
    assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
    let released = invoke_route(
        st,
        &f.w1,
        &a,
        "save_lease",
        json!({"issueId": "ENG-1", "release": true}),
    )
    .expect("released");
    assert_eq!(released["released"], true);
    assert!(
        st.route_leases_held_by("w1", "beta")
            .expect("held")
            .is_empty()
    );
    st.advance_clock(60_001);
    assert!(
        st.lease_ownership().expect("ownership").is_empty(),
        "expired"
    );
}
