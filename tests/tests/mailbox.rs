//! The mailbox end to end: projects, lead conversations, hires into real
//! tmux panes, worker reports through the real bridge, ownership of hires,
//! and durability of report receipts across a mailbox crash.

use std::time::Duration;

use clankie_tests::{Stack, bin_dir, http, python, repo_root};
use serde_json::{Value, json};

async fn wait_file(path: &std::path::Path, timeout: Duration) -> Option<Value> {
    clankie_tests::wait_json(path, timeout).await
}

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// A hire running the worker harness; returns the hire record.
fn hire_worker(
    stack: &Stack,
    project: &str,
    conversation: &str,
    out: &std::path::Path,
    text: &str,
    go: Option<&std::path::Path>,
) -> Value {
    let py = python().display().to_string();
    let script = repo_root()
        .join("tests/clients/worker_report.py")
        .display()
        .to_string();
    let clankie = bin_dir().join("clankie").display().to_string();
    let out = out.display().to_string();
    let mut args = vec![
        "hire",
        "--project",
        project,
        "--conversation",
        conversation,
        "--",
        &py,
        &script,
        &clankie,
        &out,
        text,
    ];
    let go = go.map(|g| g.display().to_string());
    if let Some(g) = &go {
        args.push(g);
    }
    json_of(&stack.clankie_ok(&args))
}

/// `kill -9` of the mailbox; returns once its supervisor restarted it.
async fn kill_mailbox(stack: &Stack) {
    stack.kill_restarted("mailbox").await;
}

fn transcript(stack: &Stack, conversation: &str) -> Vec<Value> {
    json_of(&stack.clankie_ok(&["transcript", conversation, "--json"]))["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn hired_workers_report_to_their_own_lead_exactly_once() {
    let mut stack = Stack::start().await.expect("stack");
    let tmux = stack.link_tmux("work");
    let workspace = stack.add_project("alpha", &["--worker-cap", "2"]);
    let lead_a = json_of(&stack.clankie_ok(&["lead", "add", "Lead A"]))["conversationId"]
        .as_str()
        .expect("id")
        .to_string();
    let lead_b = json_of(&stack.clankie_ok(&["lead", "add", "Lead B"]))["conversationId"]
        .as_str()
        .expect("id")
        .to_string();

    // Worker one reports at once; worker two waits for a go file.
    let out1 = stack.state.path().join("w1.json");
    let out2 = stack.state.path().join("w2.json");
    let go = stack.state.path().join("go");
    let h1 = hire_worker(&stack, "alpha", &lead_a, &out1, "w1 done", None);
    let h2 = hire_worker(&stack, "alpha", &lead_a, &out2, "w2 done", Some(&go));
    assert_eq!(h1["lead"], lead_a.as_str());
    assert!(h1["paneId"].as_str().unwrap_or("").starts_with('%'), "{h1}");
    // The cap is two: a third hire is refused.
    let third = stack.clankie(&[
        "hire",
        "--project",
        "alpha",
        "--conversation",
        &lead_a,
        "--",
        "sleep",
        "60",
    ]);
    assert!(!third.status.success());
    assert!(String::from_utf8_lossy(&third.stderr).contains("worker_cap_reached"));

    let seen = wait_file(&out1, Duration::from_secs(60))
        .await
        .expect("worker one reported");
    assert!(
        seen["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("message_clankie"))),
        "{seen}"
    );
    assert_eq!(seen["first"]["delivered"], true, "{seen}");
    assert_eq!(seen["first"]["replayed"], false, "{seen}");
    assert_eq!(
        seen["second"]["state"], "accepted",
        "the same receipt is looked up, not sent twice: {seen}"
    );
    assert_eq!(seen["second"]["receiptId"], seen["first"]["receiptId"]);
    assert_eq!(seen["env"]["CLANKIE_WORKER_PANE"], "1");
    assert_eq!(seen["env"]["CLANKIE_OPERATOR_TOKEN"], "");
    assert_eq!(seen["env"]["CLANKIE_CAPTAIN_TOKEN"], "");
    assert_eq!(
        std::fs::canonicalize(seen["cwd"].as_str().unwrap_or("")).ok(),
        std::fs::canonicalize(workspace.path()).ok(),
        "the hire runs in the project's workspace"
    );

    // Lead A got exactly one message, framed as untrusted agent output.
    let entries = transcript(&stack, &lead_a);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["kind"], "message");
    assert_eq!(entries[0]["role"], "agent");
    assert_eq!(entries[0]["untrusted"], true);
    assert_eq!(entries[0]["text"], "w1 done");
    assert_eq!(
        entries[0]["source"],
        format!("hire:{}", h1["hireId"].as_str().unwrap_or(""))
    );
    assert!(transcript(&stack, &lead_b).is_empty());
    assert!(transcript(&stack, "global-default").is_empty());

    // Only the owning lead may close a hire.
    let h1_id = h1["hireId"].as_str().expect("hire id").to_string();
    let refused = stack.clankie(&["close", &h1_id, "--conversation", &lead_b]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(err.contains("not_owner") && err.contains(&lead_a), "{err}");
    let closed = json_of(&stack.clankie_ok(&["close", &h1_id, "--conversation", &lead_a]));
    assert_eq!(closed["ended"], "closed");
    let panes = tmux.run(&["list-panes", "-a", "-F", "#{pane_id}"]);
    assert!(
        !panes.lines().any(|p| Some(p) == h1["paneId"].as_str()),
        "{panes}"
    );

    // The mailbox crashes; its receipts come back from the transcripts.
    kill_mailbox(&stack).await;

    // Lead A goes away: worker two's report falls back to the global head,
    // and the roster shows it unowned.
    stack.clankie_ok(&["lead", "remove", &lead_a]);
    std::fs::write(&go, b"go").expect("go");
    let seen = wait_file(&out2, Duration::from_secs(60))
        .await
        .expect("worker two reported");
    assert_eq!(seen["first"]["replayed"], false, "{seen}");
    assert_eq!(seen["second"]["state"], "accepted", "{seen}");
    let head = transcript(&stack, "global-default");
    assert_eq!(head.len(), 1, "{head:?}");
    assert_eq!(head[0]["text"], "w2 done");
    assert_eq!(
        transcript(&stack, &lead_a).len(),
        1,
        "nothing new went to the removed lead"
    );
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    let w2 = roster["hires"]
        .as_array()
        .and_then(|h| h.iter().find(|x| x["hireId"] == h2["hireId"]).cloned())
        .expect("w2 in roster");
    assert_eq!(w2["lead"], "unowned", "{roster}");
    let agents = json_of(&stack.clankie_ok(&["herdr", "agent", "list", "--json"]));
    let row = agents["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["hireId"] == h2["hireId"]).cloned())
        .expect("w2 listed");
    assert_eq!(row["owner"], "unowned", "{agents}");
    // Lead B adopts it by acting on it.
    let h2_id = h2["hireId"].as_str().expect("id").to_string();
    let closed = json_of(&stack.clankie_ok(&["close", &h2_id, "--conversation", &lead_b]));
    assert_eq!(closed["conversationId"], lead_b.as_str());
    assert!(stack.stop(), "clean stop");
}

/// Another machine's workspace is approved as its exact normalized
/// spelling, never resolved here, and never opened by a local hire; a
/// workspace is removed by its path (here, even after its folder is gone,
/// or on that machine), and not while the project's tracker references it.
#[tokio::test(flavor = "multi_thread")]
async fn remote_workspaces_keep_their_spelling_and_removal_follows_the_tracker() {
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let local = stack.add_project("kh2", &[]);
    let local_path = local.path().display().to_string();
    let remote = |path: &str| {
        stack.clankie(&[
            "project",
            "add",
            "kh2",
            "--workspace",
            path,
            "--machine",
            "pc",
            "--platform",
            "windows",
        ])
    };
    let added = remote(r"c:/code//kh2\");
    assert!(added.status.success(), "{added:?}");
    let shown: Value = serde_json::from_slice(&added.stdout).expect("json");
    let ws = &shown["workspaces"][1];
    assert_eq!(ws["path"], r"C:\code\kh2", "{shown}");
    assert_eq!(
        (ws["machine"].as_str(), ws["platform"].as_str()),
        (Some("pc"), Some("windows"))
    );
    // The same registration spelled otherwise is the same workspace; a
    // relative one is not a workspace at all.
    let again = remote(r"C:\code\kh2");
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("project_exists"),
        "{again:?}"
    );
    let relative = remote(r"code\kh2");
    assert!(!relative.status.success());
    assert!(
        String::from_utf8_lossy(&relative.stderr).contains("invalid_argument"),
        "{relative:?}"
    );

    // The local workspace's saved convention is a tracker reference.
    stack.clankie_ok(&[
        "project",
        "set",
        "kh2",
        "--revision",
        "2",
        "--convention",
        &format!("{local_path}=linear"),
    ]);
    let held = stack.clankie(&[
        "project",
        "remove-workspace",
        "kh2",
        "--workspace",
        &local_path,
    ]);
    assert!(!held.status.success());
    assert!(
        String::from_utf8_lossy(&held.stderr).contains("tracker_conflict"),
        "{held:?}"
    );
    stack.clankie_ok(&[
        "project",
        "set",
        "kh2",
        "--revision",
        "3",
        "--convention",
        &format!("{local_path}=none"),
    ]);
    let gone: Value = serde_json::from_str(&stack.clankie_ok(&[
        "project",
        "remove-workspace",
        "kh2",
        "--workspace",
        &local_path,
    ]))
    .expect("json");
    assert_eq!(
        gone["workspaces"].as_array().map(Vec::len),
        Some(1),
        "{gone}"
    );
    assert!(local.path().is_dir(), "no folder is deleted");

    // Only the other machine's workspace is left: a hire here refuses it.
    let hire = stack.clankie(&["hire", "--project", "kh2", "--", "sleep", "60"]);
    assert!(!hire.status.success());
    assert!(
        String::from_utf8_lossy(&hire.stderr).contains("no workspace on this machine"),
        "{hire:?}"
    );
    let gone: Value = serde_json::from_str(&stack.clankie_ok(&[
        "project",
        "remove-workspace",
        "kh2",
        "--workspace",
        r"C:\code\kh2",
        "--machine",
        "pc",
        "--platform",
        "windows",
    ]))
    .expect("json");
    assert_eq!(
        gone["workspaces"].as_array().map(Vec::len),
        Some(0),
        "{gone}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn workspaces_are_removed_only_at_the_revision_read_and_bearers_cannot_report() {
    let stack = Stack::start().await.expect("stack");
    let one = tempfile::tempdir().expect("one");
    let two = tempfile::tempdir().expect("two");
    stack.clankie_ok(&[
        "project",
        "add",
        "beta",
        "--workspace",
        &one.path().display().to_string(),
    ]);
    stack.clankie_ok(&[
        "project",
        "add",
        "beta",
        "--workspace",
        &two.path().display().to_string(),
    ]);
    let token =
        std::fs::read_to_string(stack.state.path().join("owner.token")).expect("owner token");
    let url = format!("{}/v1/operator/projects", stack.url);
    let auth = format!("Bearer {}", token.trim());
    let owner = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, _) = http(&url, "GET", &[], "");
    assert_eq!(status, 401);
    let (status, body) = http(&url, "GET", &owner, "");
    assert_eq!(status, 200, "{body}");
    let listed = json_of(&body);
    let project = &listed["projects"][0];
    assert_eq!(project["name"], "beta");
    assert_eq!(project["revision"], 2);
    let ws = project["workspaces"][1]["workspaceId"]
        .as_str()
        .expect("ws")
        .to_string();
    let id = project["projectId"].as_str().expect("id").to_string();
    let remove = |revision: u64| {
        let body = json!({ "projectId": id, "workspaceId": ws, "expectedRevision": revision });
        http(
            &format!("{url}/remove-workspace"),
            "POST",
            &owner,
            &body.to_string(),
        )
    };
    let (status, body) = remove(1);
    assert_eq!(status, 409, "{body}");
    assert_eq!(json_of(&body)["error"]["code"], "stale_revision");
    let (status, body) = remove(2);
    assert_eq!(status, 200, "{body}");
    let body = json_of(&body);
    assert_eq!(body["project"]["revision"], 3);
    assert_eq!(
        body["project"]["workspaces"].as_array().map(Vec::len),
        Some(1)
    );
    assert!(two.path().is_dir(), "no folder is deleted");
    let (status, _) = http(
        &format!("{url}/remove-workspace"),
        "POST",
        &owner,
        "{\"projectId\": 5}",
    );
    assert_eq!(status, 400);

    // A bearer-linked client sees no report tool and cannot report.
    let fleet = stack.token("remote");
    let client = stack.client(&fleet).await.expect("client");
    let tools = client.list_all_tools().await.expect("tools");
    assert!(tools.iter().all(|t| t.name != "message_clankie"));
    let r = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("message_clankie").with_arguments(
                json!({ "text": "hi", "receiptId": "r1" })
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await
        .expect("call");
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        clankie_tests::structured(&r)["error"]["code"],
        "local_process_membership_required"
    );
    assert!(
        json_of(&stack.clankie_ok(&["transcript", "global-default", "--json"]))["entries"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hire_into_a_linked_herdr_workspace_speaks_the_schema() {
    let stack = Stack::start().await.expect("stack");
    let mut herdr = clankie_tests::HerdrFixture::start(
        &format!(r#"{{"w1:p1": {}}}"#, std::process::id()),
        None,
    )
    .await;
    let (socket, acts) = (herdr.socket.clone(), herdr.acts.clone());
    let socket_arg = socket.display().to_string();
    stack.clankie_ok(&["fleet", "link", "--herdr", "--socket", &socket_arg]);
    let workspace = tempfile::tempdir().expect("workspace");
    let ws = workspace.path().display().to_string();
    stack.clankie_ok(&["project", "add", "gamma", "--workspace", &ws]);
    let hire = json_of(&stack.clankie_ok(&[
        "hire",
        "--project",
        "gamma",
        "--",
        "claude",
        "--model",
        "it's fine",
    ]));
    assert_eq!(hire["paneId"], "w1:p2", "{hire}");
    let done = herdr.acts_json();
    assert_eq!(done[0]["method"], "pane.split", "{done:?}");
    assert_eq!(done[0]["params"]["cwd"], ws.as_str());
    assert_eq!(done[0]["params"]["env"]["CLANKIE_WORKER_PANE"], "1");
    assert_eq!(done[0]["params"]["env"]["CLANKIE_OPERATOR_TOKEN"], "");
    assert_eq!(done[0]["params"]["env"]["CLANKIE_CAPTAIN_TOKEN"], "");
    assert_eq!(done[1]["method"], "pane.send_text");
    assert_eq!(done[1]["params"]["pane_id"], "w1:p2");
    assert_eq!(
        done[1]["params"]["text"],
        "exec 'claude' '--model' 'it'\\''s fine'\n"
    );
    // The roster sees the pane live; closing closes it in Herdr.
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    assert_eq!(roster["hires"][0]["ended"], "", "{roster}");
    let id = hire["hireId"].as_str().expect("id");
    let closed = json_of(&stack.clankie_ok(&["close", id]));
    assert_eq!(closed["ended"], "closed");
    let done = clankie_tests::file_lines(&acts);
    assert!(
        done.last()
            .is_some_and(|l| l.contains("pane.close") && l.contains("w1:p2")),
        "{done:?}"
    );
    let found = herdr.stop();
    assert!(found.is_empty(), "schema violations: {found:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_catalog_waits_while_the_herdr_agent_is_mid_turn() {
    let stack = Stack::start().await.expect("stack");
    let dir = tempfile::Builder::new()
        .prefix("hw")
        .tempdir_in("/tmp")
        .expect("tmp");
    let status = dir.path().join("status");
    let go = dir.path().join("go");
    let out = dir.path().join("catalog.json");
    std::fs::write(&status, "working").expect("status");
    // The waiting client is the pane's own process (its "shell").
    let mut client = std::process::Command::new(python())
        .arg(repo_root().join("tests/clients/catalog_wait.py"))
        .arg(stack.state.path())
        .arg(&go)
        .arg(&out)
        .arg("w1:p1")
        .spawn()
        .expect("client");
    let herdr = clankie_tests::HerdrFixture::start(
        &format!(r#"{{"w1:p1": {}}}"#, client.id()),
        Some(&status),
    )
    .await;
    let socket = herdr.socket.clone();
    stack.clankie_ok(&[
        "fleet",
        "link",
        "--herdr",
        "--socket",
        &socket.display().to_string(),
    ]);
    std::fs::write(&go, b"go").expect("go");
    let first = wait_file(
        &dir.path().join("catalog.json.first"),
        Duration::from_secs(30),
    )
    .await
    .expect("first revision");
    assert_eq!(first["status"], 200, "{first}");
    let before = first["body"]["catalogRevision"]
        .as_str()
        .expect("rev")
        .to_string();
    // The catalog changes while the agent works: the change is held.
    stack.clankie_ok(&["fleet", "set", "--tools", "off"]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!out.exists(), "a changed catalog was published mid-turn");
    // The turn settles: the waiting poll answers with the new revision.
    std::fs::write(&status, "idle").expect("status");
    let answer = wait_file(&out, Duration::from_secs(30))
        .await
        .expect("answer");
    assert_eq!(answer["status"], 200, "{answer}");
    assert_ne!(
        answer["body"]["catalogRevision"],
        before.as_str(),
        "{answer}"
    );
    let _ = client.wait();
    drop(herdr);
}

/// The watch reports in a conversation's transcript.
fn watches(stack: &Stack, conversation: &str) -> Vec<Value> {
    transcript(stack, conversation)
        .into_iter()
        .filter(|e| e["kind"] == "watch")
        .collect()
}

/// A stack whose completion sweep runs on a short clock.
async fn harvesting_stack() -> Stack {
    Stack::start_with(clankie_tests::StackOptions {
        env: vec![("CLANKIE_HARVEST_MS".into(), "200".into())],
        ..Default::default()
    })
    .await
    .expect("stack")
}

/// A lead driven by a native seat hears its worker's report as a message,
/// framed as the worker's own words, once per receipt; and when the
/// worker's agent exits, the sweep alone tells the lead once, as a watch
/// with an idempotent receipt, and ends the hire.
#[tokio::test(flavor = "multi_thread")]
async fn a_lead_seat_hears_reports_as_messages_and_a_workers_exit_as_one_watch() {
    use clankie_tests::seat::{Harness, Seat};
    let stack = harvesting_stack().await;
    let tmux = stack.link_tmux("work");
    let _ws = stack.add_project("alpha", &[]);
    let conv = stack.add_lead("Lead");
    let dir = tempfile::tempdir().expect("dir");
    let lead = Seat::start(
        &stack,
        dir.path(),
        "lead",
        Harness::Peer,
        &[
            "--role",
            "lead",
            "--conversation",
            &conv,
            "--project",
            "alpha",
        ],
    )
    .await;
    let worker = Seat::hire(&stack, dir.path(), "w", &conv).await;
    let first = worker
        .call("message_clankie", json!({ "text": "tests pass on main" }))
        .await;
    let receipt = first["result"]["receiptId"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    let again = worker
        .call(
            "message_clankie",
            json!({ "text": "tests pass on main", "receiptId": receipt }),
        )
        .await;
    assert_eq!(again["result"]["state"], "accepted", "{again}");
    lead.wait_inbox_containing("tests pass on main").await;
    // A repeat never queues a second delivery: the watch below arrives
    // after it would have.
    let hire_id = worker.hire["hireId"].as_str().expect("hire id").to_string();
    let pane = worker.hire["paneId"].as_str().expect("pane").to_string();
    let panes = tmux.run(&["list-panes", "-a", "-F", "#{pane_id} #{pane_pid}"]);
    let pid: i32 = panes
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{pane} ")))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{pane} in {panes}"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the worker's agent exits");
    lead.wait_inbox_containing("[watch] hire").await;
    let inbox = lead.inbox();
    let reports: Vec<&Value> = inbox
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|c| c.contains("tests pass on main"))
        })
        .collect();
    assert_eq!(reports.len(), 1, "{inbox:?}");
    assert_eq!(reports[0]["meta"]["source"], "worker", "{inbox:?}");
    assert!(
        reports[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("untrusted agent output")),
        "{inbox:?}"
    );
    let watch: Vec<&Value> = inbox
        .iter()
        .filter(|m| m["meta"]["source"] == "watch")
        .collect();
    assert_eq!(watch.len(), 1, "{inbox:?}");
    assert!(
        watch[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains(&hire_id)),
        "{inbox:?}"
    );
    // The transcript holds one watch under the hire's first receipt; the
    // roster (which observes too) adds none and shows the hire gone.
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    let hire = roster["hires"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["hireId"] == hire_id.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("{roster}"));
    assert_eq!(hire["ended"], "gone", "{roster}");
    let seen = watches(&stack, &conv);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["receiptId"], format!("watch:{hire_id}:1"));
    assert_eq!(seen[0]["untrusted"], false);
    let messages: Vec<Value> = transcript(&stack, &conv)
        .into_iter()
        .filter(|e| e["receiptId"] == receipt.as_str())
        .collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["kind"], "message");
}

/// Herdr's `done` is a completion each time the agent becomes done: the
/// sweep hears the first, an observation between turns sees it working
/// again, and the next `done` is the second; one already heard is never
/// heard twice, across a mailbox crash too.
#[tokio::test(flavor = "multi_thread")]
async fn each_time_herdr_says_a_hires_agent_is_done_its_lead_hears_one_watch() {
    let stack = harvesting_stack().await;
    let dir = tempfile::Builder::new()
        .prefix("hv")
        .tempdir_in("/tmp")
        .expect("tmp");
    let status = dir.path().join("status");
    std::fs::write(&status, "working").expect("status");
    let herdr = clankie_tests::HerdrFixture::start(
        &format!(r#"{{"w1:p1": {}}}"#, std::process::id()),
        Some(&status),
    )
    .await;
    let socket = herdr.socket.display().to_string();
    stack.clankie_ok(&["fleet", "link", "--herdr", "--socket", &socket]);
    let workspace = tempfile::tempdir().expect("workspace");
    let ws = workspace.path().display().to_string();
    stack.clankie_ok(&["project", "add", "gamma", "--workspace", &ws]);
    let conv = stack.add_lead("Lead");
    let hire = json_of(&stack.clankie_ok(&[
        "hire",
        "--project",
        "gamma",
        "--conversation",
        &conv,
        "--",
        "claude",
    ]));
    let id = hire["hireId"].as_str().expect("id").to_string();
    // Working: nothing to hear.
    stack.clankie_ok(&["roster", "--json"]);
    assert!(watches(&stack, &conv).is_empty());
    // Done: the sweep alone hears it.
    std::fs::write(&status, "done").expect("status");
    let first = clankie_tests::eventually(Duration::from_secs(30), async || {
        let w = watches(&stack, &conv);
        (!w.is_empty()).then_some(w)
    })
    .await
    .expect("the sweep heard the first completion");
    assert_eq!(first[0]["receiptId"], format!("watch:{id}:1"), "{first:?}");
    // Still done, seen again (the roster observes before it answers), and
    // after a mailbox crash: not a second completion.
    stack.clankie_ok(&["roster", "--json"]);
    kill_mailbox(&stack).await;
    stack.clankie_ok(&["roster", "--json"]);
    assert_eq!(watches(&stack, &conv).len(), 1);
    // Working again, then done: the second completion.
    std::fs::write(&status, "working").expect("status");
    stack.clankie_ok(&["roster", "--json"]);
    std::fs::write(&status, "done").expect("status");
    stack.clankie_ok(&["roster", "--json"]);
    let seen = watches(&stack, &conv);
    let receipts: Vec<&str> = seen
        .iter()
        .filter_map(|e| e["receiptId"].as_str())
        .collect();
    assert_eq!(
        receipts,
        [format!("watch:{id}:1"), format!("watch:{id}:2")],
        "{seen:?}"
    );
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    assert_eq!(
        roster["hires"][0]["ended"], "",
        "done is not gone: {roster}"
    );
    drop(herdr);
}

/// A seat Clankie did not hire is listed unowned and its reports go to the
/// global head, until the first conversation that messages it adopts it:
/// its reports then go to that lead, and the roster names it.
#[tokio::test(flavor = "multi_thread")]
async fn a_seat_started_by_hand_is_unowned_until_a_conversation_messages_it() {
    use clankie_tests::seat::Seat;
    let stack = Stack::start().await.expect("stack");
    let tmux = stack.link_tmux("work");
    let conv = stack.add_lead("Lead");
    let other = stack.add_lead("Other");
    let dir = tempfile::tempdir().expect("dir");
    let seat = Seat::by_hand(&stack, &tmux, dir.path(), "hand").await;
    let row = |stack: &Stack| {
        let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
        roster["hires"]
            .as_array()
            .and_then(|h| h.iter().find(|h| h["handStarted"] == true).cloned())
            .unwrap_or_else(|| panic!("no hand-started seat: {roster}"))
    };
    let before = row(&stack);
    assert_eq!(before["lead"], "unowned", "{before}");
    assert_eq!(before["ended"], "", "{before}");
    let hire_id = before["hireId"].as_str().expect("id").to_string();
    let head_before = transcript(&stack, "global-default").len();
    seat.call("message_clankie", json!({ "text": "started by hand" }))
        .await;
    let head = transcript(&stack, "global-default");
    assert_eq!(head.len(), head_before + 1, "{head:?}");
    assert_eq!(head[head_before]["text"], "started by hand");
    // The first conversation to message it adopts it; a later one does not.
    let first = json_of(&stack.clankie_ok(&[
        "message",
        &hire_id,
        "take the parser",
        "--conversation",
        &conv,
    ]));
    assert_eq!(first["adopted"], true, "{first}");
    assert_eq!(first["ownerConversationId"], conv.as_str(), "{first}");
    let second = json_of(&stack.clankie_ok(&[
        "message",
        &hire_id,
        "and the lexer",
        "--conversation",
        &other,
    ]));
    assert_eq!(second["adopted"], false, "{second}");
    assert_eq!(second["ownerConversationId"], conv.as_str(), "{second}");
    seat.wait_inbox_containing("take the parser").await;
    seat.call("message_clankie", json!({ "text": "parser taken" }))
        .await;
    let lead = transcript(&stack, &conv);
    assert!(lead.iter().any(|e| e["text"] == "parser taken"), "{lead:?}");
    assert_eq!(transcript(&stack, "global-default").len(), head_before + 1);
    let after = row(&stack);
    assert_eq!(after["lead"], conv.as_str(), "{after}");
    assert_eq!(after["hireId"], hire_id.as_str(), "one record: {after}");
}

/// The receipt id (`rpt_…`) anywhere in a tool's answer.
fn report_id(answer: &Value) -> String {
    let text = answer.to_string();
    let start = text
        .find("rpt_")
        .unwrap_or_else(|| panic!("no receipt id: {text}"));
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "._:-".contains(*c) || *c == '_')
        .collect()
}

/// The mailbox's report fences as the file holds them.
fn fences(stack: &Stack) -> Value {
    let path = stack.state.path().join("mailbox/report-fences.json");
    serde_json::from_slice(&std::fs::read(path).expect("fences")).expect("json")
}

/// Kills the mailbox at `step` of the next report (its test crash point)
/// and returns once the supervisor restarted it.
async fn crash_mailbox_at(
    stack: &Stack,
    step: &str,
    send: impl std::future::Future<Output = Value>,
) -> Value {
    let marker = stack
        .state
        .path()
        .join(format!("mailbox/crash-once-{step}"));
    std::fs::write(&marker, b"").expect("marker");
    let answer = send.await;
    assert!(!marker.exists(), "{step}: the crash point was reached");
    assert!(
        stack
            .wait_line("mailbox restarted", Duration::from_secs(30))
            .await,
        "{step}"
    );
    let serving = clankie_tests::eventually(Duration::from_secs(30), async || {
        stack
            .clankie(&["roster", "--json"])
            .status
            .success()
            .then_some(())
    })
    .await;
    assert!(serving.is_some(), "{step}: the mailbox serves again");
    answer
}

/// A worker's report lands at most once whatever breaks around it. A crash
/// after its fence and before its acceptance: the pane's next report
/// settles it as not delivered, and its lookup (the repeat of its id)
/// never sends it. A crash after its acceptance: its lookup finds it
/// accepted and the pane's next report goes. A lookup of an id never sent
/// seals it. A second mailbox on the same state is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_report_lands_at_most_once_across_crashes_and_lookups() {
    use clankie_tests::seat::Seat;
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let _ws = stack.add_project("alpha", &[]);
    let conv = stack.add_lead("Lead");
    let dir = tempfile::tempdir().expect("dir");
    let worker = Seat::hire(&stack, dir.path(), "w", &conv).await;
    let texts = |stack: &Stack| -> Vec<String> {
        transcript(stack, &conv)
            .iter()
            .filter_map(|e| e["text"].as_str().map(str::to_string))
            .collect()
    };
    let look_up = |id: String| {
        let w = &worker;
        async move {
            w.call(
                "message_clankie",
                json!({ "text": "again", "receiptId": id }),
            )
            .await
        }
    };

    // Fenced, then the mailbox dies before accepting it.
    let lost = crash_mailbox_at(
        &stack,
        "report-fenced",
        worker.call("message_clankie", json!({ "text": "first try" })),
    )
    .await;
    let first = report_id(&lost);
    let left = fences(&stack);
    assert_eq!(left["pending"][0]["receiptId"], first.as_str(), "{left}");
    // The pane's next report settles the dead attempt: sealed, before any
    // lookup asked.
    let next = worker
        .call("message_clankie", json!({ "text": "second try" }))
        .await;
    assert_eq!(next["result"]["delivered"], true, "{next}");
    let settled = fences(&stack);
    assert_eq!(settled["pending"], json!([]), "{settled}");
    assert_eq!(
        settled["sealed"][0]["receiptId"],
        first.as_str(),
        "{settled}"
    );
    let seen = look_up(first.clone()).await;
    assert_eq!(seen["result"]["state"], "not_delivered", "{seen}");
    assert_eq!(texts(&stack), ["second try"], "never sent: {lost}");

    // Accepted, then the mailbox dies before clearing its fence.
    let cut = crash_mailbox_at(
        &stack,
        "report-appended",
        worker.call("message_clankie", json!({ "text": "third" })),
    )
    .await;
    let third = report_id(&cut);
    let seen = look_up(third).await;
    assert_eq!(seen["result"]["state"], "accepted", "{seen}");
    let fourth = worker
        .call("message_clankie", json!({ "text": "fourth" }))
        .await;
    assert_eq!(fourth["result"]["delivered"], true, "{fourth}");
    assert_eq!(texts(&stack), ["second try", "third", "fourth"]);

    // An id never sent: its lookup seals it, and says so again.
    let never = "rpt_never_sent_0001".to_string();
    for _ in 0..2 {
        let seen = look_up(never.clone()).await;
        assert_eq!(seen["result"]["state"], "not_delivered", "{seen}");
    }
    let fences = fences(&stack);
    let sealed: Vec<&str> = fences["sealed"]
        .as_array()
        .map(|s| s.iter().filter_map(|f| f["receiptId"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        sealed.contains(&first.as_str()) && sealed.contains(&never.as_str()),
        "{fences}"
    );
    assert_eq!(fences["pending"], json!([]), "{fences}");
    assert_eq!(texts(&stack), ["second try", "third", "fourth"]);

    // The delayed original of the id its lookup sealed, sent straight to
    // the gateway (no bridge to look it up first): refused, never sent. A
    // raw send under a new id goes.
    let raw = |text: &str, id: &str| {
        worker.run(json!({ "tool": "message_clankie", "raw": true,
            "args": { "text": text, "receiptId": id } }))
    };
    let late = raw("delayed original", &never).await;
    assert_eq!(late["isError"], true, "{late}");
    assert!(late.to_string().contains("not delivered"), "{late}");
    let fresh = raw("raw and new", "rpt_raw_fresh_0001").await;
    assert_eq!(fresh["isError"], false, "{fresh}");
    assert_eq!(
        texts(&stack),
        ["second try", "third", "fourth", "raw and new"]
    );

    // One mailbox per state folder.
    let second = std::process::Command::new(bin_dir().join("clankie-mailbox"))
        .env("CLANKIE_STATE", stack.state.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("second mailbox");
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("another instance"), "{err}");
}

/// A report's receipt is its pane's: another pane that learns the id
/// (through its bridge's lookup or the raw route) hears it was never
/// delivered from there, learns nothing of where it went, and sending under
/// it sends nothing; the reporting pane still reads it accepted.
#[tokio::test(flavor = "multi_thread")]
async fn another_panes_report_receipt_is_never_answered_as_its_own() {
    use clankie_tests::seat::Seat;
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let _ws = stack.add_project("alpha", &[]);
    let conv = stack.add_lead("Lead");
    let dir = tempfile::tempdir().expect("dir");
    let a = Seat::hire(&stack, dir.path(), "a", &conv).await;
    let b = Seat::hire(&stack, dir.path(), "b", &conv).await;
    let sent = a
        .call("message_clankie", json!({ "text": "from pane a" }))
        .await;
    let id = report_id(&sent);
    let route = format!("/v1/fleet/seats/{{pane}}/reports/{id}");
    let raw = b.run(json!({ "http": ["GET", route, null] })).await;
    assert_eq!(raw["status"], 200, "{raw}");
    assert_eq!(raw["body"]["state"], "not_delivered", "{raw}");
    assert!(
        !raw.to_string().contains(&conv),
        "another pane learned where it went: {raw}"
    );
    let through = b
        .call(
            "message_clankie",
            json!({ "text": "from pane b", "receiptId": id }),
        )
        .await;
    assert_ne!(through["result"]["state"], "accepted", "{through}");
    let own = a.run(json!({ "http": ["GET", route, null] })).await;
    assert_eq!(own["body"]["state"], "accepted", "{own}");
    let texts: Vec<Value> = transcript(&stack, &conv)
        .into_iter()
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(texts, [json!("from pane a")], "nothing sent from b");
}

/// A hire made while a roster or the completion sweep is listing the panes
/// is never marked gone by that older listing: under a stream of rosters
/// and a fast sweep, every hire stays open. (A listing that began before a
/// pane was opened cannot say it closed.)
#[tokio::test(flavor = "multi_thread")]
async fn hires_made_while_panes_are_listed_are_never_marked_gone_by_the_listing() {
    let stack = harvesting_stack().await;
    let _tmux = stack.link_tmux("work");
    let _ws = stack.add_project("alpha", &["--worker-cap", "12"]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let ids: Vec<String> = std::thread::scope(|s| {
        let rosters = s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                stack.clankie(&["roster", "--json"]);
                n += 1;
            }
            n
        });
        let ids = (0..10)
            .map(|_| {
                let h = json_of(&stack.clankie_ok(&[
                    "hire",
                    "--project",
                    "alpha",
                    "--",
                    "sleep",
                    "600",
                ]));
                h["hireId"].as_str().expect("id").to_string()
            })
            .collect();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(rosters.join().expect("rosters") > 0);
        ids
    });
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    for id in &ids {
        let h = roster["hires"]
            .as_array()
            .and_then(|hs| hs.iter().find(|h| h["hireId"] == id.as_str()))
            .unwrap_or_else(|| panic!("{id}: {roster}"));
        assert_eq!(h["ended"], "", "{id} is live: {roster}");
    }
}

/// The head is named as the seed names it, `global-default`. A state folder
/// written when it was `global` (its conversation, its transcript and a
/// hire's lead) comes back under the new name after a restart, with its
/// report receipts; a request still naming `global` reaches it.
#[tokio::test(flavor = "multi_thread")]
async fn a_head_written_as_global_is_read_as_global_default_after_a_restart() {
    let mut stack = Stack::start().await.expect("stack");
    let dir = stack.state.path().join("mailbox");
    let _tmux = stack.link_tmux("work");
    let _ws = stack.add_project("alpha", &[]);
    let out = tempfile::tempdir().expect("dir");
    let report = out.path().join("report.json");
    // A hire of the head itself (no --conversation): its report is the head's.
    let py = python().display().to_string();
    let script = repo_root().join("tests/clients/worker_report.py");
    let clankie = bin_dir().join("clankie").display().to_string();
    let hire = json_of(&stack.clankie_ok(&[
        "hire",
        "--project",
        "alpha",
        "--",
        &py,
        &script.display().to_string(),
        &clankie,
        &report.display().to_string(),
        "head work done",
    ]));
    let seen = wait_file(&report, Duration::from_secs(60))
        .await
        .expect("reported");
    assert_eq!(hire["conversationId"], "global-default", "{hire}");
    let receipt = seen["first"]["receiptId"]
        .as_str()
        .unwrap_or_else(|| panic!("{seen}"))
        .to_string();
    assert!(stack.stop(), "stopped");
    // Written back as an older build kept it.
    let state_path = dir.join("state.json");
    let state = std::fs::read_to_string(&state_path).expect("state");
    std::fs::write(
        &state_path,
        state.replace("\"global-default\"", "\"global\""),
    )
    .expect("old state");
    std::fs::rename(
        dir.join("transcripts/global-default.jsonl"),
        dir.join("transcripts/global.jsonl"),
    )
    .expect("old transcript");
    stack.restart(Default::default()).await.expect("restart");
    for name in ["global-default", "global"] {
        let entries = transcript(&stack, name);
        assert_eq!(entries.len(), 1, "{name}: {entries:?}");
        assert_eq!(entries[0]["receiptId"], receipt.as_str());
    }
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    assert_eq!(roster["hires"][0]["lead"], "global-default", "{roster}");
    assert!(!dir.join("transcripts/global.jsonl").exists());
    let state = std::fs::read_to_string(&state_path).expect("state");
    assert!(!state.contains("\"global\""), "{state}");
}
