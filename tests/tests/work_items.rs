//! The owner's work-item gestures (`clankie work write` / `work receipt`,
//! seed 003 "Owner-authorized work-item gestures") on a real stack with the
//! built-in tracker: each gesture is written once under its request id; a
//! repeat or a receipt read never writes again; the journal gives the
//! original back only for the same item, gesture and saved tracker.

use clankie_tests::Stack;
use serde_json::{Value, json};

fn json_of(out: &[u8]) -> Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(out)))
}

fn owner_call(stack: &Stack, tool: &str, args: Value) -> Value {
    let out = json_of(
        stack
            .clankie_ok(&["tracker", "call", tool, &args.to_string()])
            .as_bytes(),
    );
    assert_eq!(out["outcome"], "ok", "owner {tool}: {out}");
    out["result"].clone()
}

/// `clankie work ARGS…`: its exit code and what it printed.
fn work(stack: &Stack, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["work"];
    all.extend_from_slice(args);
    let out = stack.clankie(&all);
    let printed = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        printed,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn blocked_events(stack: &Stack, item: &str) -> usize {
    let events = owner_call(
        stack,
        "list_issue_events",
        json!({ "issueId": item, "stage": "blocked" }),
    );
    events["events"].as_array().map_or(0, Vec::len)
}

fn issue(stack: &Stack, item: &str) -> Value {
    owner_call(stack, "get_issue", json!({ "id": item }))["issue"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_work_item_gesture_is_written_once_per_request_id_on_its_recorded_tracker() {
    let stack = Stack::start().await.expect("stack");
    let ws = stack.add_project("alpha", &[]);
    let ws = ws.path().display().to_string();
    stack.bind_builtin("alpha", 1, "ENG");
    stack.clankie_ok(&["tracker", "team", "OPS", "--name", "Operations"]);
    for title in ["parser", "lexer"] {
        owner_call(
            &stack,
            "save_issue",
            json!({ "team": "ENG", "title": title }),
        );
    }

    // A blocker: one event, and a request id to keep.
    let blocker = [
        "ENG-1",
        "--blocker",
        "waiting on the API",
        "--workspace",
        &ws,
    ];
    let mut first = vec!["write"];
    first.extend_from_slice(&blocker);
    let (code, wrote, err) = work(&stack, &first);
    assert_eq!(code, 0, "{wrote} {err}");
    assert_eq!(wrote["outcome"], "ok", "{wrote}");
    assert_eq!(wrote["fromReceipt"], false, "{wrote}");
    let id = wrote["requestId"].as_str().expect("request id").to_string();
    assert!(id.starts_with("work_"), "{id}");
    assert_eq!(blocked_events(&stack, "ENG-1"), 1);

    // The same id again reads the original and writes nothing.
    let mut again = first.clone();
    again.extend_from_slice(&["--request-id", &id]);
    let (code, repeat, err) = work(&stack, &again);
    assert_eq!(code, 0, "{repeat} {err}");
    assert_eq!(repeat["fromReceipt"], true, "{repeat}");
    assert_eq!(repeat["result"], wrote["result"], "{repeat}");
    let (code, read, err) = work(&stack, &["receipt", &id, "--json"]);
    assert_eq!(code, 0, "{read} {err}");
    assert_eq!(read["fromReceipt"], true, "{read}");
    assert_eq!(read["outcome"], "ok", "{read}");
    let text = stack.clankie_ok(&["work", "receipt", &id]);
    assert!(
        text.starts_with(&format!("request {id}: ok (from its receipt)")),
        "{text}"
    );
    assert_eq!(blocked_events(&stack, "ENG-1"), 1, "no repeat wrote");

    // The journal checks the source item and the gesture before it gives
    // the original back: another item or gesture under that id is refused,
    // and nothing is written.
    for other in [
        vec!["write", "ENG-2", "--blocker", "waiting on the API"],
        vec!["write", "ENG-1", "--blocker", "waiting on the design"],
    ] {
        let mut args = other.clone();
        args.extend_from_slice(&["--workspace", &ws, "--request-id", &id]);
        let (code, _, err) = work(&stack, &args);
        assert_ne!(code, 0, "{args:?} was accepted");
        assert!(err.contains("receipt_conflict"), "{err}");
    }
    assert_eq!(blocked_events(&stack, "ENG-2"), 0);
    assert_eq!(blocked_events(&stack, "ENG-1"), 1);
    let (code, _, err) = work(&stack, &["receipt", "work_never_written", "--json"]);
    assert_ne!(code, 0);
    assert!(err.contains("receipt_not_found"), "{err}");

    // Work metadata and role labels, each once.
    let (code, assigned, err) = work(
        &stack,
        &[
            "write",
            "ENG-2",
            "--assign",
            "hire:parser",
            "--priority",
            "2",
            "--workspace",
            &ws,
        ],
    );
    assert_eq!(code, 0, "{assigned} {err}");
    let lexer = issue(&stack, "ENG-2");
    assert_eq!(lexer["assignee"], "hire:parser", "{lexer}");
    assert_eq!(lexer["priority"], 2, "{lexer}");
    let label = |args: &[&str]| {
        let mut all = vec!["write", "ENG-2"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--workspace", &ws]);
        let (code, out, err) = work(&stack, &all);
        assert_eq!(code, 0, "{out} {err}");
        out
    };
    let added = label(&["--add-role-label", "reviewer"]);
    let labels = |stack: &Stack| issue(stack, "ENG-2")["labels"].clone();
    assert_eq!(labels(&stack), json!(["role:reviewer"]), "{added}");
    label(&["--add-role-label", "worker"]);
    let id = added["requestId"].as_str().expect("id").to_string();
    label(&["--remove-role-label", "reviewer"]);
    assert_eq!(labels(&stack), json!(["role:worker"]));
    // Repeating the first label's id gives its original back and does not
    // put the removed label back.
    let repeat = label(&["--add-role-label", "reviewer", "--request-id", &id]);
    assert_eq!(repeat["fromReceipt"], true, "{repeat}");
    assert_eq!(labels(&stack), json!(["role:worker"]));
    let (code, _, err) = work(
        &stack,
        &[
            "write",
            "ENG-2",
            "--add-role-label",
            "boss",
            "--workspace",
            &ws,
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("not a role"), "{err}");

    // The saved tracker is part of the journal: once the project's binding
    // moves, the same id and gesture is refused rather than answered from
    // another tracker's write.
    stack.clankie_ok(&[
        "project",
        "set",
        "alpha",
        "--revision",
        "2",
        "--team",
        "OPS",
    ]);
    let (code, _, err) = work(&stack, &again);
    assert_ne!(code, 0, "answered across a tracker move");
    assert!(err.contains("receipt_conflict"), "{err}");
    assert_eq!(blocked_events(&stack, "ENG-1"), 1);
}
