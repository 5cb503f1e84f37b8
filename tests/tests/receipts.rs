//! Receipts never lie and never replay: deadlines after dispatch, a host
//! killed mid-call, and a damaged receipt store.

use std::collections::HashMap;
use std::time::Duration;

use clankie_tests::{Stack, StackOptions, call, eventually, file_lines, structured};
use serde_json::json;

fn count(log: &std::path::Path, tag: &str) -> usize {
    file_lines(log).iter().filter(|l| l.as_str() == tag).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deadline_after_dispatch_is_uncertain_and_reconciles_to_the_settled_result() {
    let stack = Stack::start_with(StackOptions {
        request_budget_ms: Some(2_000),
        ..Default::default()
    })
    .await
    .expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let client = stack.client(&stack.token("alpha")).await.expect("client");

    let r = call(
        &client,
        "clankie_call",
        json!({"name": "edge_slow", "arguments": {"seconds": 4, "tag": "slow-1"}}),
    )
    .await
    .expect("call");
    let body = structured(&r);
    assert_eq!(body["outcome"], "uncertain", "{body}");
    let receipt = body["receiptId"].as_str().expect("receipt").to_string();

    // Later, reconciling by receipt shows the settled result.
    let settled = eventually(Duration::from_secs(10), async || {
        let r = call(&client, "clankie_call", json!({"receiptId": receipt}))
            .await
            .expect("reconcile");
        let b = structured(&r);
        assert_eq!(b["fromReceipt"], true);
        (b["outcome"] == "ok").then_some(b)
    })
    .await
    .expect("the receipt settles");
    assert!(settled["result"].to_string().contains("slow-1"));

    // Repeating the same call with the same receipt id reads the original.
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "edge_slow", "arguments": {"seconds": 4, "tag": "slow-1"}, "receiptId": receipt}),
    )
    .await
    .expect("repeat");
    assert_eq!(structured(&r)["fromReceipt"], true);
    // The same id with different arguments is a conflict, not a dispatch.
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "edge_slow", "arguments": {"seconds": 0, "tag": "other"}, "receiptId": receipt}),
    )
    .await
    .expect("conflict");
    assert_eq!(structured(&r)["error"]["code"], "receipt_conflict");
    assert_eq!(count(&log, "slow-1"), 1, "the tool ran exactly once");
    assert_eq!(count(&log, "other"), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_the_host_mid_calls_loses_and_replays_nothing() {
    let stack = Stack::start().await.expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    let client = std::sync::Arc::new(stack.client(&token).await.expect("client"));

    let ids: Vec<String> = (0..12).map(|i| format!("kill-test-{i:02}")).collect();
    let mut tasks = Vec::new();
    for id in &ids {
        let client = client.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let r = call(
                &client,
                "clankie_call",
                json!({"name": "edge_slow", "arguments": {"seconds": 1.5, "tag": id}, "receiptId": id}),
            )
            .await;
            (id, r.ok().map(|r| structured(&r)))
        }));
    }
    // Kill the host while the calls are in flight.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let host = stack.service_pid("mcp-host").expect("mcp-host pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9");
    let mut first_answers = HashMap::new();
    for t in tasks {
        let (id, r) = t.await.expect("join");
        // Every call was forwarded before the kill: none may come back as
        // an error, and each answer names its receipt.
        let body = r.as_ref().expect("an answer, not a protocol error");
        assert_eq!(body["receiptId"], id.as_str(), "{body}");
        let outcome = body["outcome"].as_str().unwrap_or_default();
        assert!(["ok", "uncertain"].contains(&outcome), "{id}: {body}");
        first_answers.insert(id, r);
    }
    assert!(
        stack
            .wait_line("mcp-host restarted", Duration::from_secs(30))
            .await,
        "clankie up restarts the host and says so: {:?}",
        stack.lines()
    );
    assert!(stack.lines().iter().any(|l| l.contains("mcp-host exited")));

    let client = stack.client(&token).await.expect("new client");
    // Wait for the edge account to verify again.
    eventually(Duration::from_secs(10), async || {
        let r = call(&client, "clankie_tools", json!({"names": ["edge_slow"]}))
            .await
            .expect("describe");
        let tools = structured(&r)["tools"].as_array().cloned();
        tools.is_some_and(|t| !t.is_empty()).then_some(())
    })
    .await;

    let mut found = 0;
    for id in &ids {
        let r = call(&client, "clankie_call", json!({"receiptId": id}))
            .await
            .expect("reconcile");
        let b = structured(&r);
        let ran = count(&log, id);
        assert!(ran <= 1, "{id} ran {ran} times");
        if b["error"]["code"] == "receipt_not_found" {
            // No durable receipt means it was never dispatched.
            assert_eq!(ran, 0, "{id} ran without a receipt");
        } else {
            found += 1;
            let outcome = b["outcome"].as_str().unwrap_or_default();
            assert!(["ok", "uncertain"].contains(&outcome), "{id}: {b}");
            if outcome == "ok" {
                assert_eq!(ran, 1);
            }
            if let Some(Some(first)) = first_answers.get(id)
                && first["outcome"] == "ok"
            {
                assert_eq!(outcome, "ok", "a settled answer never turns uncertain");
            }
        }
    }
    assert!(found > 0, "the calls in flight have durable receipts");

    // Retrying every call with its receipt id never dispatches a second time.
    for id in &ids {
        let before = count(&log, id);
        let r = call(
            &client,
            "clankie_call",
            json!({"name": "edge_slow", "arguments": {"seconds": 0.1, "tag": id}, "receiptId": id}),
        )
        .await
        .expect("retry");
        let b = structured(&r);
        if before == 1 || b["fromReceipt"] == true {
            assert_eq!(count(&log, id), before, "{id} dispatched twice: {b}");
        }
        assert!(count(&log, id) <= 1);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_committed_shard_refuses_dispatch_and_stays_in_place() {
    let mut stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    {
        let client = stack.client(&token).await.expect("client");
        assert_eq!(
            clankie_tests::utc_now(&client).await.expect("call")["outcome"],
            "ok"
        );
        client.cancel().await.expect("cancel");
    }
    assert!(stack.stop());
    let shards = stack
        .state
        .path()
        .join("worker-grants/receipts/connected-calls.json.d");
    let shard = std::fs::read_dir(&shards)
        .expect("shards")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a committed shard");
    let mut bytes = std::fs::read(&shard).expect("read");
    bytes.extend_from_slice(b" ");
    std::fs::write(&shard, &bytes).expect("tamper");

    let state = std::mem::replace(
        &mut stack.state,
        tempfile::Builder::new()
            .prefix("ck")
            .tempdir_in("/tmp")
            .expect("tmp"),
    );
    let stack = Stack::start_in(state, StackOptions::default())
        .await
        .expect("restart");
    let client = stack.client(&token).await.expect("client");
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    )
    .await
    .expect("call");
    let body = structured(&r);
    assert_eq!(body["error"]["code"], "receipt_store_corrupt", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("left in place")
    );
    assert_eq!(std::fs::read(&shard).expect("still there"), bytes);
    assert_eq!(
        std::fs::read_dir(&shards).expect("shards").count(),
        1,
        "nothing was rewritten or deleted"
    );
}

type Bridge = std::sync::Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>>;

/// Starts an `edge_slow` call with no receipt id (the bridge picks one) and
/// leaves it in flight.
fn in_flight(
    bridge: &Bridge,
    seconds: f64,
    tag: &str,
) -> tokio::task::JoinHandle<anyhow::Result<rmcp::model::CallToolResult>> {
    let bridge = bridge.clone();
    let args = json!({"name": "edge_slow", "arguments": {"seconds": seconds, "tag": tag}});
    tokio::spawn(async move { call(&bridge, "clankie_call", args).await })
}

/// Reconciles `receipt` until it settles; returns the settled body.
async fn settled(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    receipt: &str,
) -> serde_json::Value {
    eventually(Duration::from_secs(20), async || {
        let r = call(client, "clankie_call", json!({"receiptId": receipt}))
            .await
            .expect("reconcile");
        let b = structured(&r);
        if b["outcome"] == "ok" || b["outcome"] == "error" {
            return Some(b);
        }
        assert!(
            b["outcome"] == "uncertain" || b["error"]["retryable"] == true,
            "reconciling {receipt}: {b}"
        );
        None
    })
    .await
    .unwrap_or_else(|| panic!("{receipt} never settled"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_stops_answering_is_uncertain_with_the_bridges_receipt() {
    use nix::sys::signal::Signal;
    let stack = Stack::start_with(StackOptions {
        request_budget_ms: Some(2_000),
        ..Default::default()
    })
    .await
    .expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    let bridge = std::sync::Arc::new(stack.fleet_bridge(&token).await.expect("bridge"));
    clankie_tests::wait_tool(&bridge, "edge_slow").await;

    // The host freezes after the call left the gateway: the gateway's
    // deadline passes with no verdict.
    let call_task = in_flight(&bridge, 0.5, "frozen");
    assert!(clankie_tests::wait_file_line(&log, "frozen", Duration::from_secs(10)).await);
    stack.signal("mcp-host", Signal::SIGSTOP);
    let answer = structured(&call_task.await.expect("join").expect("call"));
    stack.signal("mcp-host", Signal::SIGCONT);
    assert_eq!(answer["outcome"], "uncertain", "{answer}");
    let receipt = answer["receiptId"]
        .as_str()
        .expect("the bridge's receipt id");
    assert!(receipt.starts_with("rcpt_"), "{answer}");

    let done = settled(&bridge, receipt).await;
    assert_eq!(done["outcome"], "ok", "{done}");
    assert_eq!(count(&log, "frozen"), 1, "ran exactly once");
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_through_the_bridge_answers_uncertain_with_its_receipt() {
    let stack = Stack::start().await.expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    let bridge = std::sync::Arc::new(stack.fleet_bridge(&token).await.expect("bridge"));
    clankie_tests::wait_tool(&bridge, "edge_slow").await;

    let call_task = in_flight(&bridge, 5.0, "killed");
    assert!(clankie_tests::wait_file_line(&log, "killed", Duration::from_secs(10)).await);
    // kill -9 closes the host's end: the gateway's shared connection is reset
    // under the call it forwarded.
    stack.signal("mcp-host", nix::sys::signal::Signal::SIGKILL);
    let answer = structured(&call_task.await.expect("join").expect("call"));
    assert_eq!(answer["outcome"], "uncertain", "not an error: {answer}");
    let receipt = answer["receiptId"].as_str().expect("receipt").to_string();
    assert!(receipt.starts_with("rcpt_"), "{answer}");
    assert!(
        stack
            .wait_line("mcp-host restarted", Duration::from_secs(30))
            .await,
        "{:?}",
        stack.lines()
    );
    // The restarted host read the receipt as dispatched: it stays uncertain,
    // and a retry under the same id never runs it again.
    clankie_tests::wait_tool(&bridge, "edge_slow").await;
    let r = call(&bridge, "clankie_call", json!({"receiptId": receipt}))
        .await
        .expect("reconcile");
    assert_eq!(
        structured(&r)["outcome"],
        "uncertain",
        "{:?}",
        structured(&r)
    );
    let r = call(
        &bridge,
        "clankie_call",
        json!({"name": "edge_slow", "arguments": {"seconds": 5.0, "tag": "killed"}, "receiptId": receipt}),
    )
    .await
    .expect("retry");
    assert_eq!(structured(&r)["fromReceipt"], true);
    assert_eq!(count(&log, "killed"), 1, "never dispatched twice");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_members_64_kb_fields_never_abort_the_calls_of_others() {
    let stack = Stack::start().await.expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    let others = std::sync::Arc::new(stack.client(&token).await.expect("client"));
    clankie_tests::wait_tool(&others, "edge_slow").await;
    let hostile = stack.client(&stack.token("beta")).await.expect("client");

    let mut tasks = Vec::new();
    for i in 0..20 {
        let client = others.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("inflight-{i:02}");
            let r = call(
                &client,
                "clankie_call",
                json!({"name": "edge_slow", "arguments": {"seconds": 1.5, "tag": id}, "receiptId": id}),
            )
            .await
            .expect("call");
            (id, structured(&r))
        }));
    }
    assert!(clankie_tests::wait_file_lines(&log, 20, Duration::from_secs(20)).await);
    let big = "x".repeat(64 << 10);
    for args in [
        json!({"name": "edge_slow", "arguments": {"seconds": 0, "tag": "big-id"}, "receiptId": big}),
        json!({"name": big, "arguments": {}}),
        json!({"receiptId": big}),
    ] {
        let r = call(&hostile, "clankie_call", args)
            .await
            .expect("answered");
        let b = structured(&r);
        assert_eq!(
            b["error"]["code"],
            "invalid_argument",
            "{}",
            &b.to_string()[..200.min(b.to_string().len())]
        );
        assert!(
            b.to_string().len() < 4096,
            "the refusal does not echo the field"
        );
    }
    let r = call(&hostile, "clankie_tools", json!({"names": [big]}))
        .await
        .expect("answered");
    assert_eq!(structured(&r)["error"]["code"], "invalid_argument");
    for t in tasks {
        let (id, b) = t.await.expect("join");
        assert_eq!(b["outcome"], "ok", "{id}: {b}");
        assert_eq!(b["receiptId"], id.as_str());
    }
    assert_eq!(count(&log, "big-id"), 0);
}

/// A caller's `notifications/cancelled` after dispatch: the call is not
/// replayed, and its receipt settles. The upstream was told to stop and
/// sent no answer, so it settles uncertain (`connected_tools` shows the
/// upstream stopping).
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_after_dispatch_settles_once_and_reconciles() {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    let stack = Stack::start().await.expect("stack");
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("cancel");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "edge_slow").await;
    let mut p = CallToolRequestParams::new("clankie_call");
    p.arguments = json!({"name": "edge_slow", "receiptId": "cancel-000001",
                         "arguments": {"seconds": 2, "tag": "cancelled-1"}})
    .as_object()
    .cloned();
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(p)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    assert!(
        clankie_tests::wait_file_line(&log, "cancelled-1", Duration::from_secs(20)).await,
        "the call dispatched"
    );
    handle
        .cancel(Some("the test changed its mind".into()))
        .await
        .expect("cancel");
    let settled = eventually(Duration::from_secs(20), async || {
        let r = call(
            &client,
            "clankie_call",
            json!({"receiptId": "cancel-000001"}),
        )
        .await
        .ok()?;
        let b = structured(&r);
        (b["outcome"] == "uncertain" && b["detail"].to_string().contains("cancelled")).then_some(b)
    })
    .await
    .expect("the receipt settles after the cancel");
    assert_eq!(settled["fromReceipt"], true);
    assert_eq!(
        file_lines(&log)
            .iter()
            .filter(|l| *l == "cancelled-1")
            .count(),
        1,
        "dispatched once, never replayed"
    );
}
