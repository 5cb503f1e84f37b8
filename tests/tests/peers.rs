//! Seats and peer messages end to end: hired seats in real tmux panes run
//! the real bridge under a Python MCP harness that records every channel
//! notification; the test drives them through files.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clankie_tests::{Stack, TmuxServer, bin_dir, python, repo_root, structured};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

struct Seat {
    dir: PathBuf,
    name: String,
    hire: Value,
    next: AtomicUsize,
}

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

async fn try_wait_json(path: &std::path::Path, timeout: Duration) -> Option<Value> {
    let end = std::time::Instant::now() + timeout;
    loop {
        if let Ok(bytes) = std::fs::read(path)
            && let Ok(v) = serde_json::from_slice(&bytes)
        {
            return Some(v);
        }
        if std::time::Instant::now() > end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_json(path: &std::path::Path, timeout: Duration) -> Value {
    try_wait_json(path, timeout)
        .await
        .unwrap_or_else(|| panic!("timed out waiting for {}", path.display()))
}

impl Seat {
    async fn hire(stack: &Stack, dir: &std::path::Path, name: &str, lead: &str) -> Seat {
        let py = python().display().to_string();
        let script = repo_root()
            .join("tests/clients/peer_seat.py")
            .display()
            .to_string();
        let clankie = bin_dir().join("clankie").display().to_string();
        let folder = dir.display().to_string();
        let hire = json_of(&stack.clankie_ok(&[
            "hire",
            "--project",
            "alpha",
            "--conversation",
            lead,
            "--",
            &py,
            &script,
            &clankie,
            &folder,
            name,
        ]));
        let seat = Seat {
            dir: dir.to_path_buf(),
            name: name.into(),
            hire,
            next: AtomicUsize::new(0),
        };
        if try_wait_json(&seat.file("seat"), Duration::from_secs(60))
            .await
            .is_none()
        {
            let logs = ["gateway", "mailbox", "admission"]
                .iter()
                .map(|n| {
                    let text =
                        std::fs::read_to_string(stack.state.path().join(format!("logs/{n}.log")))
                            .unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(30).collect();
                    format!(
                        "== {n}\n{}",
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            panic!("seat {name} never came up\n{logs}");
        }
        seat
    }

    fn file(&self, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}.{suffix}", self.name))
    }

    fn seat_id(&self) -> String {
        let v: Value =
            serde_json::from_slice(&std::fs::read(self.file("seat")).expect("seat")).expect("json");
        v["seatId"].as_str().expect("seat id").to_string()
    }

    async fn run(&self, cmd: Value) -> Value {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let tmp = self.file(&format!("cmd.{n}.tmp"));
        std::fs::write(&tmp, cmd.to_string()).expect("cmd");
        std::fs::rename(&tmp, self.file(&format!("cmd.{n}"))).expect("rename");
        wait_json(&self.file(&format!("res.{n}")), Duration::from_secs(60)).await
    }

    async fn call(&self, tool: &str, args: Value) -> Value {
        self.run(json!({ "tool": tool, "args": args })).await
    }

    async fn receipt(&self, id: &str) -> Value {
        self.run(json!({ "http": ["GET", format!("/v1/fleet/seats/{{pane}}/peer-messages/{id}"), null] }))
            .await
    }

    fn inbox(&self) -> Vec<Value> {
        std::fs::read_to_string(self.file("inbox"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    async fn wait_inbox(&self, content: &str) {
        for _ in 0..600 {
            if self.inbox().iter().any(|m| m["content"] == content) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "{} never received {content:?}: {:?}",
            self.name,
            self.inbox()
        );
    }

    /// The seat's bridge process (the harness's `clankie mcp --fleet` child).
    fn bridge(&self, tmux: &TmuxServer) -> Pid {
        let pane = self.hire["paneId"].as_str().expect("pane");
        let harness: i32 = tmux
            .run(&["display-message", "-p", "-t", pane, "#{pane_pid}"])
            .parse()
            .expect("pane pid");
        let children = Stack::children_matching(harness, "mcp");
        Pid::from_raw(*children.first().expect("bridge process"))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn seats_message_each_other_with_honest_receipts() {
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
    let lead = json_of(&stack.clankie_ok(&["lead", "add", "Lead"]))["conversationId"]
        .as_str()
        .expect("id")
        .to_string();
    let dir = tempfile::tempdir().expect("dir");
    let a = Seat::hire(&stack, dir.path(), "a", &lead).await;
    let b = Seat::hire(&stack, dir.path(), "b", &lead).await;
    let (a_id, b_id) = (a.seat_id(), b.seat_id());

    // Discovery: each sees the other, with its exact binding.
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
    assert!(seen_b["binding"]["agentPid"].as_i64().unwrap_or(0) > 0);

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
    let mut receipt = json!(null);
    for _ in 0..100 {
        receipt = a.receipt(&first_id).await;
        if receipt["body"]["state"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    // Written to Clankie's default transcript as agent output.
    let head = json_of(&stack.clankie_ok(&["transcript", "global"]));
    let peers: Vec<&Value> = head["entries"]
        .as_array()
        .map(|e| e.iter().filter(|x| x["kind"] == "peer").collect())
        .unwrap_or_default();
    assert_eq!(peers.len(), 1, "{head}");
    assert_eq!(peers[0]["role"], "agent");

    // While a message is unresolved, another send to that seat reads it.
    let b_bridge = b.bridge(&tmux);
    kill(b_bridge, Signal::SIGSTOP).expect("stop b");
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
    for _ in 0..200 {
        if a.receipt(&second_id).await["body"]["state"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    let other_lead = json_of(&stack.clankie_ok(&["lead", "add", "Other"]))["conversationId"]
        .as_str()
        .expect("id")
        .to_string();
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
    kill(c.bridge(&tmux), Signal::SIGSTOP).expect("stop c");
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
    let mut listed = json!(null);
    for _ in 0..100 {
        listed = a.run(json!({ "list": true })).await;
        if !listed["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("message_peer")))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tools = listed["tools"].as_array().cloned().unwrap_or_default();
    assert!(
        !tools.contains(&json!("message_peer")) && !tools.contains(&json!("list_fleet_seats")),
        "{listed}"
    );
    assert!(tools.contains(&json!("message_clankie")), "{listed}");
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
}
