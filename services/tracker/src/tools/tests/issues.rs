//! Dispatch, issues, comments, role limits, idempotency, the change log and cut-over.

use super::*;

#[test]
fn every_tool_is_dispatched_and_unknown_tools_are_invalid() {
    let mut f = fx();
    for def in vocabulary::vocabulary() {
        let r = invoke(&mut f.store, &f.lead, def.name, json!({}));
        if let Err(StoreError::Invalid(m)) = &r {
            assert!(!m.contains("no store implementation"), "{}: {m}", def.name);
        }
    }
    assert!(matches!(
        invoke(&mut f.store, &f.lead, "drop_tables", json!({})),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        invoke(&mut f.store, &f.lead, "get_issue", json!([1])),
        Err(StoreError::Invalid(_))
    ));
    // Unknown arguments are refused even past the host.
    assert!(matches!(
        invoke(&mut f.store, &f.lead, "list_teams", json!({"bogus": 1})),
        Err(StoreError::Invalid(_))
    ));
}

#[test]
fn issues_round_trip_with_updates_comments_and_relations() {
    let mut f = fx();
    let st = &mut f.store;
    let created = ok(
        st,
        &f.w1,
        "save_issue",
        json!({"team": "eng", "title": "Fix login", "priority": 2, "assignee": "me",
               "labels": ["bug", "Bug", " "], "repo": "kh2"}),
    );
    assert_eq!(created["replayed"], false);
    let issue = &created["issue"];
    assert_eq!(issue["identifier"], "ENG-1");
    assert_eq!(issue["assignee"], "w1");
    assert_eq!(issue["labels"], json!(["bug"]));
    assert_eq!(issue["state"], "Backlog");
    let id = s(&issue["id"]);
    let child = ok(
        st,
        &f.w2,
        "save_issue",
        json!({"team": "ENG", "title": "Sub-task", "parentId": "eng-1", "state": "Todo"}),
    );
    assert_eq!(child["issue"]["parentId"], Value::from(id.clone()));
    let got = ok(
        st,
        &f.w2,
        "get_issue",
        json!({"id": "ENG-1", "includeRelations": true, "linearHistory": false}),
    );
    assert_eq!(got["issue"]["title"], "Fix login");
    assert_eq!(got["relations"]["children"][0]["identifier"], "ENG-2");
    // A parent cannot become its own descendant.
    assert!(matches!(
        call(
            st,
            &f.w1,
            "save_issue",
            json!({"id": "ENG-1", "parentId": "ENG-2"})
        ),
        Err(StoreError::Invalid(_))
    ));

    let updated_at = issue["updatedAt"].as_i64().expect("updatedAt");
    let moved = ok(
        st,
        &f.w1,
        "save_issue",
        json!({"id": "ENG-1", "state": "In Progress", "ifUpdatedAt": updated_at}),
    );
    assert_eq!(moved["issue"]["stateType"], "started");
    let before = st.cursor().expect("cursor");
    assert!(matches!(
        call(
            st,
            &f.w2,
            "save_issue",
            json!({"id": id, "title": "x", "ifUpdatedAt": updated_at})
        ),
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        st.cursor().expect("cursor"),
        before,
        "a conflict writes nothing"
    );

    let mine = ok(st, &f.w1, "list_issues", json!({"assignee": "me"}));
    assert_eq!(mine["issues"].as_array().expect("issues").len(), 1);
    let started = ok(st, &f.w1, "list_issues", json!({"state": "started"}));
    assert_eq!(started["issues"][0]["identifier"], "ENG-1");
    let todo = ok(
        st,
        &f.w1,
        "list_issues",
        json!({"state": "todo", "label": "nope"}),
    );
    assert!(todo["issues"].as_array().expect("issues").is_empty());
    let bugs = ok(st, &f.w1, "list_issues", json!({"label": "BUG"}));
    assert_eq!(bugs["issues"].as_array().expect("issues").len(), 1);
    let found = ok(st, &f.w2, "search_issues", json!({"query": "LOGIN"}));
    assert_eq!(found["issues"][0]["identifier"], "ENG-1");
    let kids = ok(st, &f.w2, "list_issues", json!({"parentId": "ENG-1"}));
    assert_eq!(kids["issues"][0]["identifier"], "ENG-2");

    // Paging: one at a time, newest created first, then the end.
    let p1 = ok(
        st,
        &f.w1,
        "list_issues",
        json!({"limit": 1, "orderBy": "createdAt"}),
    );
    assert_eq!(p1["issues"][0]["identifier"], "ENG-2");
    assert_eq!(p1["hasMore"], true);
    let p2 = ok(
        st,
        &f.w1,
        "list_issues",
        json!({"limit": 1, "orderBy": "createdAt", "cursor": p1["cursor"].clone()}),
    );
    assert_eq!(p2["issues"][0]["identifier"], "ENG-1");
    assert_eq!(p2["hasMore"], false);
    assert_eq!(p2["cursor"], Value::Null);

    let c = ok(
        st,
        &f.w1,
        "create_comment",
        json!({"issueId": "ENG-1", "body": "on it"}),
    );
    let cid = s(&c["comment"]["id"]);
    let edited = ok(
        st,
        &f.w1,
        "save_comment",
        json!({"id": cid, "body": "done soon"}),
    );
    assert_eq!(edited["comment"]["body"], "done soon");
    not_allowed(
        call(
            st,
            &f.w2,
            "save_comment",
            json!({"id": cid, "body": "hijack"}),
        ),
        Role::Worker,
    );
    ok(
        st,
        &f.lead,
        "save_comment",
        json!({"id": cid, "body": "lead edit"}),
    );
    ok(
        st,
        &f.w2,
        "save_comment",
        json!({"issueId": "ENG-1", "body": "second"}),
    );
    let comments = ok(st, &f.w2, "list_comments", json!({"issueId": "ENG-1"}));
    let bodies: Vec<String> = comments["comments"]
        .as_array()
        .expect("comments")
        .iter()
        .map(|c| s(&c["body"]))
        .collect();
    assert_eq!(bodies, ["lead edit", "second"]);
    assert!(matches!(
        call(st, &f.w1, "get_issue", json!({"id": "ENG-99"})),
        Err(StoreError::NotFound(_))
    ));
}

#[test]
fn the_store_refuses_what_limited_roles_may_not_do_and_writes_nothing() {
    let mut f = fx();
    let st = &mut f.store;
    issue(st, &f.w1);
    let before = st.cursor().expect("cursor");
    let writes = st.count_writes("w1").expect("writes");
    // Straight to the store, past the host's schema and profile.
    let w = not_allowed(
        invoke(
            st,
            &f.w1,
            "save_issue_status",
            json!({"id": "ENG-1", "state": "Done"}),
        ),
        Role::Worker,
    );
    assert_eq!(w, "save_issue_status is not available to the worker role");
    not_allowed(
        invoke(
            st,
            &f.w1,
            "save_issue",
            json!({"id": "ENG-1", "state": "Done"}),
        ),
        Role::Worker,
    );
    not_allowed(
        invoke(
            st,
            &f.reviewer,
            "save_issue",
            json!({"id": "ENG-1", "cycle": null}),
        ),
        Role::Reviewer,
    );
    not_allowed(
        invoke(
            st,
            &f.w1,
            "post_issue_event",
            json!({"issueId": "ENG-1", "stage": "owner-verified"}),
        ),
        Role::Worker,
    );
    for tool in [
        "save_project",
        "post_run_control",
        "list_inbox",
        "post_retire_guided_review",
    ] {
        not_allowed(invoke(st, &f.reviewer, tool, json!({})), Role::Reviewer);
    }
    // The typed store API refuses on its own, without the dispatcher.
    let r = st.save_issue_as(
        &f.w1,
        crate::store::SaveIssue {
            id: Some("ENG-1".into()),
            state: Some("done".into()),
            ..Default::default()
        },
    );
    assert!(matches!(
        r,
        Err(StoreError::NotAllowed {
            role: Role::Worker,
            ..
        })
    ));
    let r = st.save_issue_status(
        &f.w1,
        SaveIssueStatus {
            id: "ENG-1".into(),
            state: "Done".into(),
            ..Default::default()
        },
    );
    assert!(matches!(r, Err(StoreError::NotAllowed { .. })));
    assert_eq!(
        st.cursor().expect("cursor"),
        before,
        "refusals write nothing"
    );
    assert_eq!(st.count_writes("w1").expect("writes"), writes);

    // The lead and the owner may.
    ok(
        st,
        &f.w1,
        "save_issue",
        json!({"id": "ENG-1", "state": "In Review"}),
    );
    let inbox = ok(st, &f.lead, "list_inbox", json!({}));
    assert_eq!(inbox["items"][0]["kind"], "owner-verification");
    let done = ok(
        st,
        &f.lead,
        "save_issue_status",
        json!({"id": "ENG-1", "state": "Done"}),
    );
    assert_eq!(done["issue"]["stateType"], "completed");
    let drift = ok(st, &f.lead, "list_drift", json!({}));
    assert_eq!(drift["drift"][0]["reason"], "completed-unverified");
    ok(
        st,
        &f.owner,
        "post_issue_event",
        json!({"issueId": "ENG-1", "stage": "owner-verified", "body": "checked on the phone"}),
    );
    let drift = ok(st, &f.lead, "list_drift", json!({}));
    assert!(drift["drift"].as_array().expect("drift").is_empty());
    let inbox = ok(st, &f.lead, "list_inbox", json!({}));
    assert!(inbox["items"].as_array().expect("items").is_empty());
    ok(
        st,
        &f.lead,
        "save_issue",
        json!({"id": "ENG-1", "cycle": ""}),
    );
}

#[test]
fn a_repeated_idempotency_key_replays_and_writes_nothing() {
    let mut f = fx();
    let st = &mut f.store;
    let args = json!({"team": "ENG", "title": "once", "idempotencyKey": "k-1"});
    let first = ok(st, &f.w1, "save_issue", args.clone());
    let cursor = st.cursor().expect("cursor");
    let writes = st.count_writes("w1").expect("writes");
    let again = ok(st, &f.w1, "save_issue", args.clone());
    assert_eq!(again["replayed"], true);
    assert_eq!(again["issue"], first["issue"]);
    assert_eq!(st.cursor().expect("cursor"), cursor, "no change logged");
    assert_eq!(
        st.count_writes("w1").expect("writes"),
        writes,
        "no audit row"
    );
    let receipt = ok(
        st,
        &f.w1,
        "get_write_receipt",
        json!({"idempotencyKey": "k-1"}),
    );
    assert_eq!(receipt["receipt"]["tool"], "save_issue");
    assert_eq!(receipt["receipt"]["result"]["identifier"], "ENG-1");
    assert!(matches!(
        call(
            st,
            &f.w2,
            "get_write_receipt",
            json!({"idempotencyKey": "k-1"})
        ),
        Err(StoreError::NotFound(_))
    ));
    // The same key on another tool is a conflict, not a replay.
    assert!(matches!(
        call(
            st,
            &f.w1,
            "create_comment",
            json!({"issueId": "ENG-1", "body": "b", "idempotencyKey": "k-1"})
        ),
        Err(StoreError::Conflict(_))
    ));
    // Aliases share their tool's keys.
    let c = ok(
        st,
        &f.w1,
        "create_comment",
        json!({"issueId": "ENG-1", "body": "b", "idempotencyKey": "c-1"}),
    );
    let c2 = ok(
        st,
        &f.w1,
        "save_comment",
        json!({"issueId": "ENG-1", "body": "b", "idempotencyKey": "c-1"}),
    );
    assert_eq!(c2["replayed"], true);
    assert_eq!(c2["comment"], c["comment"]);
    // Other tool families replay too.
    let e1 = ok(
        st,
        &f.w1,
        "post_issue_event",
        json!({"issueId": "ENG-1", "stage": "claimed", "idempotencyKey": "e"}),
    );
    let cursor = st.cursor().expect("cursor");
    let e2 = ok(
        st,
        &f.w1,
        "post_issue_event",
        json!({"issueId": "ENG-1", "stage": "claimed", "idempotencyKey": "e"}),
    );
    assert_eq!(e2["replayed"], true);
    assert_eq!(e1["event"], e2["event"]);
    assert_eq!(st.cursor().expect("cursor"), cursor);
    let l1 = ok(
        st,
        &f.w1,
        "save_lease",
        json!({"issueId": "ENG-1", "ttlMs": 60000, "idempotencyKey": "l"}),
    );
    let l2 = ok(
        st,
        &f.w1,
        "save_lease",
        json!({"issueId": "ENG-1", "ttlMs": 60000, "idempotencyKey": "l"}),
    );
    assert_eq!(l2["replayed"], true);
    assert_eq!(l1["lease"], l2["lease"]);
}

#[test]
fn list_changes_pages_by_cursor() {
    let mut f = fx();
    let st = &mut f.store;
    for i in 0..5 {
        ok(
            st,
            &f.w1,
            "save_issue",
            json!({"team": "ENG", "title": format!("i{i}")}),
        );
    }
    let end = st.cursor().expect("cursor");
    let mut cursor = 0;
    let mut seen = Vec::new();
    loop {
        let page = ok(
            st,
            &f.w2,
            "list_changes",
            json!({"cursor": cursor, "limit": 2, "waitMs": 0}),
        );
        let changes = page["changes"].as_array().expect("changes").clone();
        let next = page["cursor"].as_i64().expect("cursor");
        if changes.is_empty() {
            assert_eq!(next, cursor, "an empty page echoes the cursor");
            break;
        }
        assert!(changes.len() <= 2);
        for c in &changes {
            seen.push(c["seq"].as_i64().expect("seq"));
        }
        assert_eq!(next, *seen.last().expect("seq"));
        cursor = next;
    }
    assert_eq!(cursor, end);
    assert_eq!(seen.len() as i64, end, "every change once, in order");
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    let all = ok(st, &f.w2, "list_changes", json!({}));
    assert_eq!(all["changes"][0]["entity"], "team");
    assert!(matches!(
        invoke(st, &f.w2, "list_changes", json!({"limit": 501})),
        Err(StoreError::Invalid(_))
    ));
}

#[test]
fn a_cut_over_team_keeps_linear_keys_and_its_items_are_owned() {
    let mut f = fx();
    let st = &mut f.store;
    let team = st.cut_over_team("VUH", "Vuh", "import").expect("cut over");
    assert!(team.cut_over);
    let imported = st
        .import_issue(
            "VUH",
            "VUH-12",
            "5f1c-linear-uuid",
            "Old issue",
            "from Linear",
            "In Progress",
            "import",
        )
        .expect("import");
    assert_eq!(imported.identifier, "VUH-12");
    assert_eq!(imported.linear_id.as_deref(), Some("5f1c-linear-uuid"));
    assert!(matches!(
        st.import_issue("VUH", "VUH-12", "other", "again", "", "Todo", "import"),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        st.import_issue("ENG", "ENG-7", "x", "t", "", "Todo", "import"),
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        st.import_issue("VUH", "ENG-7", "y", "t", "", "Todo", "import"),
        Err(StoreError::Invalid(_))
    ));
    let local = ok(
        st,
        &f.w1,
        "save_issue",
        json!({"team": "VUH", "title": "New here"}),
    );
    assert_eq!(local["issue"]["identifier"], "LOCAL-VUH-1");
    let eng = ok(
        st,
        &f.w1,
        "save_issue",
        json!({"team": "ENG", "title": "not imported"}),
    );
    assert_eq!(eng["issue"]["identifier"], "ENG-1");
    ok(
        st,
        &f.lead,
        "save_project",
        json!({"name": "Work Sync", "team": "VUH"}),
    );
    ok(
        st,
        &f.lead,
        "save_project",
        json!({"name": "Elsewhere", "team": "ENG"}),
    );

    let local_id = s(&local["issue"]["id"]);
    for r in [
        "VUH-12",
        "vuh-12",
        "5f1c-linear-uuid",
        "LOCAL-VUH-1",
        local_id.as_str(),
        "VUH",
        "Work Sync",
        "work sync",
    ] {
        assert!(st.owns_item(r).expect("owns"), "{r} is ours");
    }
    for r in ["VUH-13", "ENG-1", "ENG", "Elsewhere", "NOPE-1", ""] {
        assert!(!st.owns_item(r).expect("owns"), "{r} is not ours");
    }
    let by_linear = ok(st, &f.w1, "get_issue", json!({"id": "5f1c-linear-uuid"}));
    assert_eq!(by_linear["issue"]["identifier"], "VUH-12");
    let t = ok(st, &f.w1, "get_team", json!({"query": "vuh"}));
    assert_eq!(t["team"]["cutOver"], true);
    // Untouched imports are not drift; a completed import is not unverified.
    st.import_issue("VUH", "VUH-3", "done-uuid", "Shipped", "", "Done", "import")
        .expect("import done");
    let drift = ok(st, &f.lead, "list_drift", json!({"team": "VUH"}));
    assert!(drift["drift"].as_array().expect("drift").is_empty());
}
