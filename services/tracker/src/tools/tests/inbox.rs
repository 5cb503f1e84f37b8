//! The lead's inbox: a worker's ask and the lead's answer.

use super::*;

#[test]
fn an_ask_lands_in_the_inbox_and_the_lead_answers_it() {
    let mut f = fx();
    let st = &mut f.store;
    issue(st, &f.w1);
    let ask = ok(
        st,
        &f.w1,
        "post_issue_ask",
        json!({"issueId": "ENG-1", "question": "Which port?"}),
    );
    let ask_id = s(&ask["ask"]["id"]);
    not_allowed(invoke(st, &f.w1, "list_inbox", json!({})), Role::Worker);
    let inbox = ok(st, &f.lead, "list_inbox", json!({}));
    let item = &inbox["items"][0];
    assert_eq!(item["id"], Value::from(format!("ask:{ask_id}")));
    assert_eq!(item["kind"], "ask");
    assert_eq!(item["identifier"], "ENG-1");
    assert_eq!(item["state"], "unread");
    let one = ok(
        st,
        &f.lead,
        "get_inbox_item",
        json!({"id": item["id"].clone()}),
    );
    assert_eq!(one["ask"]["question"], "Which port?");
    let read = ok(
        st,
        &f.lead,
        "save_inbox_item",
        json!({"id": item["id"].clone(), "state": "read"}),
    );
    assert_eq!(read["item"]["state"], "read");
    assert!(matches!(
        call(
            st,
            &f.lead,
            "save_inbox_item",
            json!({"id": item["id"].clone(), "state": "snoozed"})
        ),
        Err(StoreError::Invalid(_))
    ));
    let until = st.now() + 60_000;
    ok(
        st,
        &f.lead,
        "save_inbox_item",
        json!({"id": item["id"].clone(), "state": "snoozed", "snoozeUntil": until}),
    );
    assert!(
        ok(st, &f.lead, "list_inbox", json!({}))["items"]
            .as_array()
            .expect("items")
            .is_empty()
    );
    st.advance_clock(60_001);
    assert_eq!(
        ok(st, &f.lead, "list_inbox", json!({}))["items"]
            .as_array()
            .expect("items")
            .len(),
        1
    );

    let answered = ok(
        st,
        &f.lead,
        "post_inbox_answer",
        json!({"id": ask_id, "answer": "7300"}),
    );
    assert_eq!(answered["ask"]["answer"], "7300");
    assert_eq!(answered["ask"]["answeredBy"], "clankie");
    assert_eq!(answered["event"]["stage"], "note");
    assert!(s(&answered["event"]["body"]).contains("7300"));
    assert_eq!(answered["replayed"], false);
    let events = ok(st, &f.w1, "list_issue_events", json!({"issueId": "ENG-1"}));
    assert_eq!(events["events"][0]["stage"], "note");
    assert!(
        ok(st, &f.lead, "list_inbox", json!({}))["items"]
            .as_array()
            .expect("items")
            .is_empty()
    );
    let all = ok(st, &f.lead, "list_inbox", json!({"includeResolved": true}));
    assert_eq!(all["items"][0]["resolved"], true);
    assert!(matches!(
        call(
            st,
            &f.lead,
            "post_inbox_answer",
            json!({"id": format!("ask:{ask_id}"), "answer": "again"})
        ),
        Err(StoreError::Conflict(_))
    ));
}
