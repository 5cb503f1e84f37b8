//! Seats and peer messages end to end: hired seats in real tmux panes run
//! the real bridge under a Python MCP harness that records every channel
//! notification; the test drives them through files.

use std::time::Duration;

use clankie_tests::{Stack, TmuxServer, eventually, structured};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use clankie_tests::seat::{Seat, json_of};

/// A stack linked to tmux session `work`, with project `alpha` (its
/// workspace folder, kept alive by the caller) and a lead.
async fn linked_project() -> (Stack, TmuxServer, tempfile::TempDir, String) {
    let stack = Stack::start().await.expect("stack");
    let tmux = TmuxServer::start("work");
    let socket = tmux.socket.display().to_string();
    stack.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    let workspace = tempfile::tempdir().expect("workspace");
    stack.clankie_ok(&[
        "project",
        "add",
        "alpha",
        "--workspace",
        &workspace.path().display().to_string(),
    ]);
    let lead = stack.add_lead("Lead");
    (stack, tmux, workspace, lead)
}

#[tokio::test(flavor = "multi_thread")]
async fn seats_message_each_other_with_honest_receipts() {
    let (stack, tmux, _workspace, lead) = linked_project().await;
    let dir = tempfile::tempdir().expect("dir");
    let a = Seat::hire(&stack, dir.path(), "a", &lead).await;
    let b = Seat::hire(&stack, dir.path(), "b", &lead).await;
    let (a_id, b_id) = (a.seat_id(), b.seat_id());

    // Discovery: each sees the other, as a sender needs it, and no process
    // facts of another pane's.
    let listed = a.call("list_fleet_seats", json!({})).await;
    assert_eq!(listed["isError"], false, "{listed}");
    assert_eq!(listed["result"]["self"]["seatId"], a_id.as_str());
    let seats = listed["result"]["seats"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let seen_b = seats
        .iter()
        .find(|s| s["seatId"] == b_id.as_str())
        .expect("b listed");
    assert_eq!(seen_b["paneId"], b.hire["paneId"]);
    assert_eq!(seen_b["hireId"], b.hire["hireId"]);
    assert!(seen_b.get("binding").is_none(), "{seen_b}");
    let text = listed["result"]["seats"].to_string();
    for fact in [
        "agentPid",
        "agentExecutable",
        "agentPidfsId",
        "agentStartTime",
    ] {
        assert!(!text.contains(fact), "{fact} in {text}");
    }
    assert!(
        listed["result"]["self"]["binding"]["agentPid"]
            .as_i64()
            .unwrap_or(0)
            > 0
    );

    // A message, its native delivery, and its receipt.
    let sent = a
        .call(
            "message_peer",
            json!({ "seat": b_id, "text": "hello b", "receiptId": "k1" }),
        )
        .await;
    assert_eq!(sent["isError"], false, "{sent}");
    let first_id = sent["result"]["peerMessageId"]
        .as_str()
        .expect("id")
        .to_string();
    b.wait_inbox("hello b").await;
    let got = b.inbox();
    assert_eq!(got[0]["meta"]["source"], "peer");
    assert_eq!(got[0]["meta"]["from"], format!("seat:{a_id}"));
    let delivered = eventually(Duration::from_secs(5), async || {
        let r = a.receipt(&first_id).await;
        (r["body"]["state"] == "delivered").then_some(r)
    })
    .await;
    let receipt = match delivered {
        Some(r) => r,
        None => a.receipt(&first_id).await,
    };
    assert_eq!(receipt["body"]["state"], "delivered", "{receipt}");
    assert_eq!(receipt["body"]["outcome"], "confirmed");
    // The same receipt id reads the original and sends nothing.
    let again = a
        .call(
            "message_peer",
            json!({ "seat": b_id, "text": "hello b", "receiptId": "k1" }),
        )
        .await;
    assert_eq!(again["result"]["original"], true, "{again}");
    assert_eq!(again["result"]["peerMessageId"], first_id.as_str());
    // Written to the sender's lead's transcript as agent output, source peer.
    let written = json_of(&stack.clankie_ok(&["transcript", &lead, "--json"]));
    let peers: Vec<&Value> = written["entries"]
        .as_array()
        .map(|e| e.iter().filter(|x| x["kind"] == "peer").collect())
        .unwrap_or_default();
    assert_eq!(peers.len(), 1, "{written}");
    assert_eq!(peers[0]["role"], "agent");
    assert_eq!(peers[0]["source"], "peer");
    assert!(peers[0]["text"].as_str().unwrap_or("").ends_with("hello b"));

    // While a message is unresolved, another send to that seat reads it.
    let b_bridge = b.bridge(&tmux);
    clankie_tests::pause(b_bridge.as_raw());
    let second = a
        .call(
            "message_peer",
            json!({ "seat": b_id, "text": "second", "receiptId": "k2" }),
        )
        .await;
    assert_eq!(second["result"]["state"], "unresolved", "{second}");
    let second_id = second["result"]["peerMessageId"]
        .as_str()
        .expect("id")
        .to_string();
    let third = a
        .call(
            "message_peer",
            json!({ "seat": b_id, "text": "third", "receiptId": "k3" }),
        )
        .await;
    assert_eq!(third["result"]["original"], true, "{third}");
    assert_eq!(third["result"]["peerMessageId"], second_id.as_str());

    // The mailbox crashes mid-flight: nothing is lost or sent twice.
    let mailbox = stack.service_pid("mailbox").expect("mailbox pid");
    kill(Pid::from_raw(mailbox), Signal::SIGKILL).expect("kill mailbox");
    assert!(
        stack
            .wait_line("mailbox restarted", Duration::from_secs(30))
            .await
    );
    let read = a.receipt(&second_id).await;
    assert_eq!(read["body"]["state"], "unresolved", "{read}");
    kill(b_bridge, Signal::SIGCONT).expect("continue b");
    b.wait_inbox("second").await;
    eventually(Duration::from_secs(20), async || {
        (a.receipt(&second_id).await["body"]["state"] == "delivered").then_some(())
    })
    .await;
    assert_eq!(a.receipt(&second_id).await["body"]["state"], "delivered");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let inbox = b.inbox();
    assert_eq!(
        inbox.iter().filter(|m| m["content"] == "second").count(),
        1,
        "{inbox:?}"
    );
    assert_eq!(
        inbox.iter().filter(|m| m["content"] == "third").count(),
        0,
        "{inbox:?}"
    );

    // A lead's message reaches the seat too, naming its owner.
    let other_lead = stack.add_lead("Other");
    let hire_a = a.hire["hireId"].as_str().expect("hire");
    let msg = json_of(&stack.clankie_ok(&[
        "message",
        hire_a,
        "from the other lead",
        "--conversation",
        &other_lead,
    ]));
    assert_eq!(msg["ownerConversationId"], lead.as_str());
    a.wait_inbox("from the other lead").await;
    let lead_msg = a
        .inbox()
        .into_iter()
        .find(|m| m["content"] == "from the other lead")
        .expect("msg");
    assert_eq!(lead_msg["meta"]["source"], "lead");

    // A recipient that closes mid-flight: recipient_gone, never resent.
    let c = Seat::hire(&stack, dir.path(), "c", &lead).await;
    let c_id = c.seat_id();
    clankie_tests::pause(c.bridge(&tmux).as_raw());
    let to_c = a
        .call(
            "message_peer",
            json!({ "seat": c_id, "text": "to c", "receiptId": "k4" }),
        )
        .await;
    assert_eq!(to_c["result"]["state"], "unresolved", "{to_c}");
    let to_c_id = to_c["result"]["peerMessageId"]
        .as_str()
        .expect("id")
        .to_string();
    stack.clankie_ok(&[
        "close",
        c.hire["hireId"].as_str().expect("hire"),
        "--conversation",
        &lead,
    ]);
    let gone = a.receipt(&to_c_id).await;
    assert_eq!(gone["body"]["state"], "recipient_gone", "{gone}");
    assert_eq!(gone["body"]["outcome"], "unconfirmed");
    let refused = a
        .call(
            "message_peer",
            json!({ "seat": c_id, "text": "again", "receiptId": "k5" }),
        )
        .await;
    assert_eq!(refused["isError"], true);
    assert_eq!(
        refused["result"]["error"]["code"], "recipient_unknown",
        "{refused}"
    );

    // A bearer-linked client cannot send.
    let token = stack.token("local");
    let client = stack.client(&token).await.expect("bearer client");
    let r = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("message_peer").with_arguments(
                json!({ "seat": b_id, "text": "spoof" })
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await
        .expect("call");
    assert_eq!(structured(&r)["error"]["code"], "native_seat_required");

    // Peer messages off: both tools hidden, sends refused (a stale catalog
    // included), receipt reads still allowed.
    stack.clankie_ok(&["fleet", "set", "--peer-messages", "off"]);
    let withdrawn = eventually(Duration::from_secs(10), async || {
        let listed = a.run(json!({ "list": true })).await;
        let tools = listed["tools"].as_array();
        (!tools.is_some_and(|t| t.contains(&json!("message_peer")))).then_some(listed)
    })
    .await;
    let listed = match withdrawn {
        Some(l) => l,
        None => a.run(json!({ "list": true })).await,
    };
    let tools = listed["tools"].as_array().cloned().unwrap_or_default();
    assert!(
        !tools.contains(&json!("message_peer")) && !tools.contains(&json!("list_fleet_seats")),
        "{listed}"
    );
    assert!(tools.contains(&json!("message_clankie")), "{listed}");
    let settings = &listed["meta"]["clankie/settings"];
    assert_eq!(settings["peerMessages"], "off", "{listed}");
    assert_eq!(settings["reviews"], "off", "no reviewer: {listed}");
    let off = a
        .call(
            "message_peer",
            json!({ "seat": b_id, "text": "off", "receiptId": "k6" }),
        )
        .await;
    assert_eq!(off["result"]["error"]["code"], "peer_messages_off", "{off}");
    let off = a.call("list_fleet_seats", json!({})).await;
    assert_eq!(off["result"]["error"]["code"], "peer_messages_off", "{off}");
    let read = a.receipt(&first_id).await;
    assert_eq!(read["status"], 200, "{read}");
    assert_eq!(read["body"]["state"], "delivered");
    assert_eq!(
        b.inbox().iter().filter(|m| m["content"] == "off").count(),
        0
    );

    // Peers never cross a fleet boundary: a seat of another fleet neither
    // sees nor reaches this fleet's seats.
    stack.clankie_ok(&["fleet", "set", "--peer-messages", "on"]);
    let other = TmuxServer::start("elsewhere");
    let linked = stack.clankie_ok(&[
        "fleet",
        "link",
        "--tmux",
        &other.socket.display().to_string(),
        "--fleet",
        "other",
    ]);
    let link = linked
        .split_whitespace()
        .last()
        .expect("link id")
        .to_string();
    let x = Seat::hire_with(&stack, dir.path(), "x", &lead, "worker", &link).await;
    let seen = x.call("list_fleet_seats", json!({})).await;
    assert_eq!(seen["result"]["self"]["fleet"], "other", "{seen}");
    assert!(
        seen["result"]["seats"]
            .as_array()
            .is_some_and(|s| s.is_empty()),
        "{seen}"
    );
    let cross = x
        .call(
            "message_peer",
            json!({ "seat": b_id, "text": "across", "receiptId": "x1" }),
        )
        .await;
    assert_eq!(
        cross["result"]["error"]["code"], "recipient_unknown",
        "{cross}"
    );
    assert_eq!(
        b.inbox()
            .iter()
            .filter(|m| m["content"] == "across")
            .count(),
        0
    );
    // The audit names every send by ids, never its text.
    let audit = std::fs::read_to_string(stack.state.path().join("audit/peer-messages.jsonl"))
        .expect("audit");
    assert_eq!(audit.lines().count(), 3, "{audit}");
    assert!(
        !audit.contains("hello b") && audit.contains(&first_id),
        "{audit}"
    );
}

/// A seat's sends and claims are rechecked once, by the mailbox's seat
/// observation, not also at the gateway's door. A process that outlives
/// its pane and keeps its proven connection sends nothing: the observation
/// refuses and admission drops the ticket, and the connection's next
/// request is proven again in full and refused there.
#[tokio::test(flavor = "multi_thread")]
async fn a_process_that_outlives_its_pane_sends_nothing_on_its_proven_connection() {
    use clankie_tests::{peer_path, python, repo_root};
    let (stack, tmux, _workspace, lead) = linked_project().await;
    let dir = tempfile::tempdir().expect("dir");
    let b = Seat::hire(&stack, dir.path(), "b", &lead).await;
    let b_id = b.seat_id();

    // The pane's process starts the client in its own session, so the
    // client outlives the pane on its proven connection.
    let out = stack.state.path().join("gone");
    let client = format!(
        "env CLANKIE_STATE={} PATH={} {} {} send {b_id} {}",
        stack.state.path().display(),
        peer_path(),
        python().display(),
        repo_root().join("tests/clients/local_http.py").display(),
        out.display()
    );
    let pane = tmux.run(&[
        "split-window",
        "-t",
        "work",
        "-P",
        "-F",
        "#{pane_id}",
        &format!("exec bash -c 'setsid {client} & exec sleep 300'"),
    ]);
    let wait = |p: std::path::PathBuf| async move {
        clankie_tests::wait_json(&p, Duration::from_secs(60))
            .await
            .unwrap_or_else(|| panic!("no {}", p.display()))
    };
    let first = wait(out.with_extension("first")).await;
    assert_eq!(first["status"], 200, "a seat while its pane lives: {first}");

    tmux.run(&["kill-pane", "-t", &pane]);
    std::fs::write(out.with_extension("go"), "").expect("go");
    // Refused by the mailbox's observation (the door only looked the
    // ticket up) ...
    let sent = wait(out.with_extension("sent")).await;
    assert_eq!(sent["status"], 403, "{sent}");
    assert_eq!(sent["code"], "native_seat_required", "{sent}");
    // ... which dropped the ticket: the same connection is proven again in
    // full, and that finds no pane.
    let again = wait(out.clone()).await;
    assert_eq!(again["status"], 403, "{again}");
    assert_eq!(
        again["code"], "local_process_membership_required",
        "{again}"
    );
    let status = json_of(&stack.clankie_ok(&["fleet", "status", "--json"]));
    let refusals = &status["localProofs"]["refusals"];
    let count = |r: &str| refusals[r].as_u64().unwrap_or(0);
    // Its pane's process went with the pane (or the pane read found it
    // gone first).
    assert!(
        count("lineage_changed") + count("pane_gone") >= 1,
        "{status}"
    );
    assert!(
        refusals["no_pane_in_lineage"].as_u64().unwrap_or(0) >= 1,
        "{status}"
    );

    // Nothing was sent: no delivery, no transcript line.
    assert!(
        !b.inbox_contains("from beyond", Duration::from_secs(2))
            .await,
        "{:?}",
        b.inbox()
    );
    let written = json_of(&stack.clankie_ok(&["transcript", &lead, "--json"]));
    assert!(!written.to_string().contains("from beyond"), "{written}");
}
