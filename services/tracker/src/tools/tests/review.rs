//! Guided reviews, from draft to retirement.

use super::*;

#[test]
fn a_guided_review_is_drafted_submitted_walked_and_retired() {
    let mut f = fx();
    let st = &mut f.store;
    issue(st, &f.w1);
    let b = ok(
        st,
        &f.w1,
        "save_evidence_bundle",
        json!({"issueId": "ENG-1", "summary": "s"}),
    );
    let r = ok(
        st,
        &f.w1,
        "save_guided_review",
        json!({"issueId": "ENG-1", "title": "Check login"}),
    );
    let rid = s(&r["review"]["id"]);
    assert_eq!(r["review"]["state"], "draft");
    assert!(matches!(
        call(
            st,
            &f.w1,
            "post_guided_review_submit",
            json!({"reviewId": rid})
        ),
        Err(StoreError::Invalid(_))
    ));
    let step = ok(
        st,
        &f.w1,
        "save_guided_review_step",
        json!({"reviewId": rid, "instruction": "Open the app", "expected": "A login form",
               "evidenceBundleId": b["bundle"]["id"].clone()}),
    );
    let sid = s(&step["step"]["id"]);
    assert_eq!(step["step"]["position"], 1);
    ok(
        st,
        &f.w1,
        "save_guided_review_step",
        json!({"reviewId": rid, "instruction": "Sign in"}),
    );
    let edited = ok(
        st,
        &f.w1,
        "save_guided_review_step",
        json!({"reviewId": rid, "stepId": sid, "instruction": "Open the app on the phone"}),
    );
    assert_eq!(edited["step"]["expected"], "A login form");
    ok(
        st,
        &f.w1,
        "save_guided_review",
        json!({"issueId": "ENG-1", "id": rid, "title": "Check login", "summary": "two steps"}),
    );
    let submitted = ok(
        st,
        &f.w1,
        "post_guided_review_submit",
        json!({"reviewId": rid}),
    );
    assert_eq!(submitted["review"]["state"], "ready");
    assert!(matches!(
        call(
            st,
            &f.w1,
            "post_guided_review_submit",
            json!({"reviewId": rid})
        ),
        Err(StoreError::Conflict(_))
    ));
    let inbox = ok(st, &f.lead, "list_inbox", json!({}));
    assert_eq!(
        inbox["items"][0]["id"],
        Value::from(format!("review:{rid}"))
    );
    let target = ok(
        st,
        &f.lead,
        "get_inbox_item",
        json!({"id": format!("review:{rid}")}),
    );
    assert_eq!(target["review"]["title"], "Check login");

    let res = ok(
        st,
        &f.reviewer,
        "post_guided_review_step_result",
        json!({"reviewId": rid, "stepId": sid, "outcome": "pass", "note": "fine"}),
    );
    assert_eq!(res["step"]["outcome"], "pass");
    assert_eq!(res["step"]["resultBy"], "rev");
    ok(
        st,
        &f.reviewer,
        "post_guided_review_comment",
        json!({"reviewId": rid, "body": "step 2 next"}),
    );
    let got = ok(st, &f.w2, "get_guided_review", json!({"id": rid}));
    assert_eq!(got["review"]["summary"], "two steps");
    assert_eq!(got["steps"].as_array().expect("steps").len(), 2);
    let steps = ok(
        st,
        &f.w2,
        "list_guided_review_steps",
        json!({"reviewId": rid}),
    );
    assert_eq!(steps["steps"][0]["outcome"], "pass");
    assert_eq!(steps["steps"][1]["outcome"], Value::Null);
    let comments = ok(
        st,
        &f.w2,
        "list_guided_review_comments",
        json!({"reviewId": rid}),
    );
    assert_eq!(comments["comments"][0]["author"], "rev");
    let listed = ok(
        st,
        &f.w2,
        "list_guided_reviews",
        json!({"issueId": "ENG-1", "state": "ready"}),
    );
    assert_eq!(listed["reviews"].as_array().expect("reviews").len(), 1);

    not_allowed(
        invoke(
            st,
            &f.w1,
            "post_retire_guided_review",
            json!({"reviewId": rid, "reason": "x"}),
        ),
        Role::Worker,
    );
    let retired = ok(
        st,
        &f.lead,
        "post_retire_guided_review",
        json!({"reviewId": rid, "reason": "superseded"}),
    );
    assert_eq!(retired["review"]["state"], "retired");
    assert_eq!(retired["review"]["retiredReason"], "superseded");
    assert!(matches!(
        call(
            st,
            &f.w1,
            "save_guided_review_step",
            json!({"reviewId": rid, "instruction": "late"})
        ),
        Err(StoreError::Conflict(_))
    ));
    assert!(
        ok(st, &f.lead, "list_inbox", json!({}))["items"]
            .as_array()
            .expect("items")
            .is_empty()
    );
    let events = ok(
        st,
        &f.w2,
        "list_guided_review_events",
        json!({"reviewId": rid}),
    );
    let kinds: Vec<String> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| s(&e["kind"]))
        .collect();
    assert_eq!(
        kinds,
        [
            "created",
            "step-added",
            "step-added",
            "step-updated",
            "updated",
            "submitted",
            "step-result",
            "comment",
            "retired"
        ]
    );
}
