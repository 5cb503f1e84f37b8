//! Planning reads (projects, labels, cycles), users, audit and drift.

use super::*;

#[test]
fn projects_labels_and_planning_reads() {
    let mut f = fx();
    let st = &mut f.store;
    not_allowed(
        invoke(st, &f.w1, "save_project", json!({"name": "P"})),
        Role::Worker,
    );
    let p = ok(
        st,
        &f.lead,
        "save_project",
        json!({"name": "Work Sync", "team": "ENG", "state": "started", "targetDate": "2026-11-30"}),
    );
    let pid = s(&p["project"]["id"]);
    assert!(matches!(
        call(st, &f.lead, "save_project", json!({"name": "work sync"})),
        Err(StoreError::Conflict(_))
    ));
    let p2 = ok(
        st,
        &f.lead,
        "save_project",
        json!({"id": "Work Sync", "lead": "james", "ifUpdatedAt": p["project"]["updatedAt"].clone()}),
    );
    assert_eq!(p2["project"]["lead"], "james");
    assert_eq!(
        ok(st, &f.w1, "get_project", json!({"query": "WORK SYNC"}))["project"]["id"],
        Value::from(pid.clone())
    );
    let listed = ok(
        st,
        &f.w1,
        "list_projects",
        json!({"state": "started", "team": "ENG"}),
    );
    assert_eq!(listed["projects"].as_array().expect("projects").len(), 1);
    let statuses = ok(st, &f.w1, "list_project_statuses", json!({}));
    assert_eq!(statuses["statuses"].as_array().expect("statuses").len(), 6);
    let issue_statuses = ok(st, &f.w1, "list_issue_statuses", json!({"team": "ENG"}));
    assert_eq!(issue_statuses["statuses"][3]["name"], "In Review");

    let u = ok(
        st,
        &f.w1,
        "save_status_update",
        json!({"projectId": "Work Sync", "health": "atRisk", "body": "slipping"}),
    );
    let uid = s(&u["statusUpdate"]["id"]);
    not_allowed(
        call(
            st,
            &f.w2,
            "save_status_update",
            json!({"id": uid, "body": "not mine"}),
        ),
        Role::Worker,
    );
    ok(
        st,
        &f.w1,
        "save_status_update",
        json!({"id": uid, "health": "onTrack"}),
    );
    let updates = ok(st, &f.w2, "get_status_updates", json!({"projectId": pid}));
    assert_eq!(updates["statusUpdates"][0]["health"], "onTrack");

    ok(
        st,
        &f.w1,
        "create_issue_label",
        json!({"name": "bug", "color": "#ff0000"}),
    );
    ok(
        st,
        &f.w1,
        "save_issue_label",
        json!({"name": "bug", "teamId": "ENG"}),
    );
    assert!(matches!(
        call(st, &f.w1, "create_issue_label", json!({"name": "BUG"})),
        Err(StoreError::Conflict(_))
    ));
    let labels = ok(st, &f.w1, "list_issue_labels", json!({"team": "ENG"}));
    assert_eq!(labels["labels"].as_array().expect("labels").len(), 2);

    let now = st.now();
    let c1 = st
        .create_cycle("clankie", "ENG", "", now - 1000, now + 1000)
        .expect("cycle");
    let c2 = st
        .create_cycle("clankie", "ENG", "Next", now + 1000, now + 2000)
        .expect("cycle");
    assert_eq!((c1.number, c1.name.as_str()), (1, "Cycle 1"));
    let current = ok(
        st,
        &f.w1,
        "list_cycles",
        json!({"teamId": "ENG", "type": "current"}),
    );
    assert_eq!(current["cycles"][0]["id"], Value::from(c1.id.clone()));
    let next = ok(st, &f.w1, "list_cycles", json!({"type": "next"}));
    assert_eq!(next["cycles"][0]["id"], Value::from(c2.id.clone()));
    assert_eq!(
        ok(st, &f.w1, "list_cycles", json!({}))["cycles"]
            .as_array()
            .expect("cycles")
            .len(),
        2
    );
    assert_eq!(
        ok(st, &f.w1, "get_cycle", json!({"id": c2.id}))["cycle"]["number"],
        2
    );
    let m = st
        .create_milestone("clankie", "Work Sync", "Beta", "", Some("2026-11-01"))
        .expect("milestone");
    assert_eq!(
        ok(
            st,
            &f.w1,
            "list_milestones",
            json!({"project": "Work Sync"})
        )["milestones"][0]["name"],
        "Beta"
    );
    assert_eq!(
        ok(st, &f.w1, "get_milestone", json!({"id": m.id}))["milestone"]["targetDate"],
        "2026-11-01"
    );

    let planned = ok(
        st,
        &f.lead,
        "save_issue",
        json!({"team": "ENG", "title": "planned", "project": "Work Sync", "milestone": "beta", "cycle": "1"}),
    );
    assert_eq!(planned["issue"]["projectId"], Value::from(pid.clone()));
    assert_eq!(planned["issue"]["milestone"], Value::from(m.id.clone()));
    assert_eq!(planned["issue"]["cycle"], Value::from(c1.id.clone()));
    assert_eq!(
        ok(
            st,
            &f.w1,
            "list_issues",
            json!({"project": "work sync", "cycle": "1"})
        )["issues"]
            .as_array()
            .expect("issues")
            .len(),
        1
    );
    assert!(matches!(
        call(
            st,
            &f.lead,
            "save_issue",
            json!({"id": "ENG-1", "milestone": "nope"})
        ),
        Err(StoreError::NotFound(_))
    ));

    let d = st
        .create_document(
            "clankie",
            "Runbook",
            "# Steps",
            Some("Work Sync"),
            Some("ENG-1"),
        )
        .expect("doc");
    let docs = ok(st, &f.w1, "list_documents", json!({"issueId": "ENG-1"}));
    assert_eq!(
        docs["documents"][0]["content"], "",
        "lists leave content out"
    );
    assert_eq!(
        ok(st, &f.w1, "get_document", json!({"id": d.id}))["document"]["content"],
        "# Steps"
    );
    st.create_release("clankie", "v0.1.0", "first", &["ENG-1"])
        .expect("release");
    let rel = ok(st, &f.w1, "get_release", json!({"id": "v0.1.0"}));
    assert_eq!(rel["release"]["issueIds"][0], planned["issue"]["id"]);
    assert_eq!(
        ok(st, &f.w1, "list_releases", json!({}))["releases"]
            .as_array()
            .expect("releases")
            .len(),
        1
    );
    st.create_initiative("clankie", "Cut over", "", "Active", None)
        .expect("initiative");
    assert_eq!(
        ok(st, &f.w1, "list_initiatives", json!({"status": "active"}))["initiatives"][0]["name"],
        "Cut over"
    );
}

#[test]
fn users_audit_and_drift() {
    let mut f = fx();
    let st = &mut f.store;
    ok(
        st,
        &f.w1,
        "save_issue",
        json!({"team": "ENG", "title": "t", "assignee": "w9", "repo": "kh2"}),
    );
    ok(
        st,
        &f.w1,
        "save_issue",
        json!({"id": "ENG-1", "state": "In Progress"}),
    );
    let me = ok(st, &f.w2, "get_user", json!({"query": "me"}));
    assert_eq!(me["user"]["name"], "w2");
    assert_eq!(me["user"]["isMe"], true);
    assert_eq!(me["user"]["writes"], 0);
    let w1 = ok(st, &f.w2, "get_user", json!({"query": "w1"}));
    assert_eq!(w1["user"]["writes"], 2);
    let users = ok(st, &f.w2, "list_users", json!({}));
    let names: Vec<String> = users["users"]
        .as_array()
        .expect("users")
        .iter()
        .map(|u| s(&u["name"]))
        .collect();
    assert_eq!(names, ["clankie", "w1", "w2", "w9"]);
    assert!(matches!(
        call(st, &f.w2, "get_user", json!({"query": "stranger"})),
        Err(StoreError::NotFound(_))
    ));
    let audit = ok(
        st,
        &f.lead,
        "list_audit_events",
        json!({"actor": "w1", "limit": 1}),
    );
    assert_eq!(audit["events"][0]["tool"], "save_issue");
    assert_eq!(audit["events"][0]["role"], "worker");
    assert_eq!(audit["events"][0]["entity"], "issue");
    let older = ok(
        st,
        &f.lead,
        "list_audit_events",
        json!({"actor": "w1", "cursor": audit["cursor"].clone()}),
    );
    assert_eq!(older["events"].as_array().expect("events").len(), 1);
    let all = ok(st, &f.lead, "list_audit_events", json!({}));
    assert_eq!(
        all["events"]
            .as_array()
            .expect("events")
            .last()
            .expect("first")["tool"],
        "create_team"
    );
    assert_eq!(st.count_writes("w1").expect("writes"), 2);

    assert!(
        ok(st, &f.lead, "list_drift", json!({}))["drift"]
            .as_array()
            .expect("drift")
            .is_empty()
    );
    st.advance_clock(crate::store::IDLE_MS + 1);
    let drift = ok(st, &f.lead, "list_drift", json!({}));
    assert_eq!(drift["drift"][0]["reason"], "started-idle");
    assert_eq!(drift["drift"][0]["issue"]["identifier"], "ENG-1");
    ok(st, &f.w1, "save_lease", json!({"issueId": "ENG-1"}));
    assert!(
        ok(st, &f.lead, "list_drift", json!({}))["drift"]
            .as_array()
            .expect("drift")
            .is_empty()
    );
    ok(
        st,
        &f.lead,
        "save_issue_status",
        json!({"id": "ENG-1", "state": "Canceled"}),
    );
    let drift = ok(st, &f.lead, "list_drift", json!({}));
    assert_eq!(drift["drift"][0]["reason"], "leased-but-closed");
}
