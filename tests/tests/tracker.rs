//! The built-in tracker end to end: hired seats in real tmux panes run the
//! real bridge (`clankie mcp --fleet`) under a Python MCP harness and call
//! the `linear_*` vocabulary through `clankie_call`; the gateway, mcp-host,
//! mailbox and tracker are the real binaries. The owner's route is the CLI.

use std::path::Path;
use std::time::Duration;

use clankie_tests::seat::{Harness, Seat};
use clankie_tests::{Stack, TmuxServer, bin_dir};
use serde_json::{Value, json};

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

async fn wait_json(path: &Path, timeout: Duration) -> Value {
    clankie_tests::wait_json(path, timeout)
        .await
        .unwrap_or_else(|| panic!("timed out waiting for {}", path.display()))
}

/// A seat hired with the tracker harness (`tests/clients/tracker_seat.py`).
async fn tracker_seat(stack: &Stack, dir: &Path, name: &str, project: &str, role: &str) -> Seat {
    let flags = ["--project", project, "--role", role];
    Seat::start(stack, dir, name, Harness::Tracker, &flags).await
}

/// The tracker's tools through a seat's `clankie_call`.
trait Linear {
    /// One `clankie_call` of `linear_<tool>`.
    async fn linear(&self, tool: &str, args: Value) -> Value;
    /// The same, which must succeed: its structured answer.
    async fn linear_ok(&self, tool: &str, args: Value) -> Value;
}

impl Linear for Seat {
    async fn linear(&self, tool: &str, args: Value) -> Value {
        self.run(json!({ "call": format!("linear_{tool}"), "args": args }))
            .await
    }

    async fn linear_ok(&self, tool: &str, args: Value) -> Value {
        let r = self.linear(tool, args.clone()).await;
        assert_eq!(
            r["isError"], false,
            "{} linear_{tool}({args}) failed: {r}",
            self.name
        );
        structured(&r)
    }
}

/// The tracker's answer inside a `clankie_call` result.
fn structured(r: &Value) -> Value {
    let result = &r["result"];
    result
        .get("result")
        .and_then(|x| x.get("structuredContent"))
        .cloned()
        .unwrap_or_else(|| result.clone())
}

/// The refusal code of a failed call: the bridge's refusal, or the tool's
/// error.
fn code(r: &Value) -> String {
    let s = structured(r);
    s["error"]["code"]
        .as_str()
        .or_else(|| r["result"]["error"]["code"].as_str())
        .unwrap_or("")
        .to_string()
}

/// The host's own refusal (before dispatch: no outcome), and the role it
/// names.
fn host_refusal(r: &Value) -> (String, String) {
    assert!(
        r["result"].get("outcome").is_none() && r["result"]["error"].is_object(),
        "refused by the host before dispatch, not by the store: {r}"
    );
    let e = &r["result"]["error"];
    (
        e["code"].as_str().unwrap_or("").to_string(),
        e["role"].as_str().unwrap_or("").to_string(),
    )
}

fn owner_call(stack: &Stack, tool: &str, args: Value) -> Value {
    let out = json_of(&stack.clankie_ok(&["tracker", "call", tool, &args.to_string()]));
    assert_eq!(out["outcome"], "ok", "owner {tool}: {out}");
    out["result"].clone()
}

fn budgets(stack: &Stack) -> Value {
    let owner = std::fs::read_to_string(stack.state.path().join("owner.token")).expect("token");
    let auth = format!("Bearer {}", owner.trim());
    let (status, body) = clankie_tests::http(
        &format!("{}/v1/tracker/request-budget", stack.url),
        "GET",
        &[("authorization", &auth)],
        "",
    );
    assert_eq!(status, 200, "{body}");
    json_of(&body)
}

fn actor_budget<'a>(b: &'a Value, role: &str, class: &str) -> &'a Value {
    b["actors"]
        .as_array()
        .expect("actors")
        .iter()
        .find(|a| a["role"] == role && a["class"] == class)
        .unwrap_or_else(|| panic!("no {role} {class} budget in {b}"))
}

struct World {
    stack: Stack,
    _tmux: TmuxServer,
    workspace: tempfile::TempDir,
    dir: tempfile::TempDir,
}

/// A stack with a linked tmux session, project `alpha` bound to the
/// built-in team ENG.
async fn world() -> World {
    let stack = Stack::start().await.expect("stack");
    let tmux = stack.link_tmux("work");
    let workspace = stack.add_project("alpha", &["--worker-cap", "8", "--reviewer"]);
    let set = stack.bind_builtin("alpha", 1, "ENG");
    assert_eq!(set["tracker"], "builtin");
    let dir = tempfile::tempdir().expect("dir");
    World {
        stack,
        _tmux: tmux,
        workspace,
        dir,
    }
}

const HIDDEN: &[&str] = &[
    "linear_post_run_control",
    "linear_save_issue_status",
    "linear_save_project",
    "linear_post_retire_guided_review",
    "linear_list_inbox",
    "linear_get_inbox_item",
    "linear_save_inbox_item",
    "linear_post_inbox_answer",
];

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_tracks_work_but_only_the_lead_completes_it() {
    let w = world().await;
    let worker = tracker_seat(&w.stack, w.dir.path(), "worker", "alpha", "worker").await;

    // Discovery: the worker's catalog never shows the hidden verbs.
    for query in [
        "linear",
        "status",
        "inbox",
        "run control",
        "project",
        "guided review",
    ] {
        let r = worker.run(json!({ "tools": { "query": query } })).await;
        let names: Vec<String> = r["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools for {query}: {r}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").to_string())
            .collect();
        for h in HIDDEN {
            assert!(
                !names.iter().any(|n| n == h),
                "{h} shown for {query:?}: {names:?}"
            );
        }
    }
    let described = worker
        .run(json!({ "tools": { "names": ["linear_save_issue", "linear_save_issue_status", "linear_post_issue_event"] } }))
        .await;
    let tools = described["result"]["tools"].as_array().expect("described");
    assert_eq!(tools.len(), 2, "the hidden verb is omitted: {described}");
    let save_issue = tools
        .iter()
        .find(|t| t["name"] == "linear_save_issue")
        .expect("save_issue");
    let schema = save_issue["inputSchema"].to_string();
    assert!(!schema.contains("\"cycle\""), "cycle dropped: {schema}");
    let event = tools
        .iter()
        .find(|t| t["name"] == "linear_post_issue_event")
        .expect("event");
    assert!(
        !event["inputSchema"].to_string().contains("owner-verified"),
        "owner-verified dropped"
    );

    // The worker's everyday writes.
    let created = worker
        .linear_ok(
            "save_issue",
            json!({ "team": "ENG", "title": "Fix the flaky test", "idempotencyKey": "create-1" }),
        )
        .await;
    let id = created["issue"]["identifier"]
        .as_str()
        .expect("identifier")
        .to_string();
    assert_eq!(id, "ENG-1");
    let again = worker
        .linear_ok(
            "save_issue",
            json!({ "team": "ENG", "title": "Fix the flaky test", "idempotencyKey": "create-1" }),
        )
        .await;
    assert_eq!(again["issue"]["identifier"], "ENG-1");
    assert_eq!(again["replayed"], true);
    worker
        .linear_ok(
            "save_comment",
            json!({ "issueId": id, "body": "Looking into it." }),
        )
        .await;
    let lease = worker
        .linear_ok("save_lease", json!({ "issueId": id, "ttlMs": 600000 }))
        .await;
    assert!(
        lease["lease"]["holder"]
            .as_str()
            .is_some_and(|h| h.starts_with("hire:")),
        "{lease}"
    );
    worker
        .linear_ok(
            "post_issue_event",
            json!({ "issueId": id, "stage": "started", "body": "on it" }),
        )
        .await;
    worker
        .linear_ok("save_issue", json!({ "id": id, "state": "In Review" }))
        .await;

    // It cannot complete the issue, by argument or by the hidden verb.
    let refused = [
        worker
            .linear("save_issue", json!({ "id": id, "state": "Done" }))
            .await,
        worker
            .linear("save_issue", json!({ "id": id, "cycle": "c1" }))
            .await,
        worker
            .linear("save_issue_status", json!({ "id": id, "state": "Done" }))
            .await,
        worker
            .linear(
                "post_issue_event",
                json!({ "issueId": id, "stage": "owner-verified" }),
            )
            .await,
        worker
            .linear(
                "post_run_control",
                json!({ "runId": "r1", "action": "cancel" }),
            )
            .await,
    ];
    for r in &refused {
        assert_eq!(
            host_refusal(r),
            ("role_not_allowed".to_string(), "worker".to_string()),
            "{r}"
        );
    }
    // Its writes stay inside its project's team.
    w.stack
        .clankie_ok(&["tracker", "team", "OPS", "--name", "Operations"]);
    let ops = owner_call(
        &w.stack,
        "save_issue",
        json!({ "team": "OPS", "title": "pager" }),
    );
    let ops_id = ops["issue"]["identifier"]
        .as_str()
        .expect("ops id")
        .to_string();
    let outside = worker
        .linear("save_issue", json!({ "team": "OPS", "title": "stray" }))
        .await;
    assert_eq!(code(&outside), "tracker_out_of_scope", "{outside}");
    let outside = worker
        .linear(
            "save_comment",
            json!({ "issueId": ops_id, "body": "stray" }),
        )
        .await;
    assert_eq!(code(&outside), "tracker_out_of_scope", "{outside}");
    // Reads are not scoped.
    worker.linear_ok("get_issue", json!({ "id": ops_id })).await;
    let ops_comments = owner_call(&w.stack, "list_comments", json!({ "issueId": ops_id }));
    assert_eq!(ops_comments["comments"].as_array().expect("c").len(), 0);
    let issue = owner_call(&w.stack, "get_issue", json!({ "id": id }));
    assert_eq!(issue["issue"]["state"], "In Review", "nothing completed it");
    let comments = owner_call(&w.stack, "list_comments", json!({ "issueId": id }));
    assert_eq!(comments["comments"].as_array().expect("comments").len(), 1);
    assert!(
        comments["comments"][0]["author"]
            .as_str()
            .is_some_and(|a| a.starts_with("hire:")),
        "recorded as the worker: {comments}"
    );

    // A reviewer hire is the reviewer; a lead hire is the lead and completes.
    let reviewer = tracker_seat(&w.stack, w.dir.path(), "reviewer", "alpha", "reviewer").await;
    reviewer
        .linear_ok("list_issues", json!({ "team": "ENG" }))
        .await;
    let refused = reviewer
        .linear("save_issue_status", json!({ "id": id, "state": "Done" }))
        .await;
    assert_eq!(
        host_refusal(&refused),
        ("role_not_allowed".to_string(), "reviewer".to_string())
    );
    let b = budgets(&w.stack);
    actor_budget(&b, "reviewer", "interactive");
    actor_budget(&b, "worker", "interactive");

    let lead = tracker_seat(&w.stack, w.dir.path(), "lead", "alpha", "lead").await;
    let tools: Vec<&str> = lead.ready["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!tools.is_empty());
    let shown = lead
        .run(json!({ "tools": { "names": ["linear_save_issue_status", "linear_list_inbox"] } }))
        .await;
    assert_eq!(
        shown["result"]["tools"].as_array().expect("tools").len(),
        2,
        "{shown}"
    );
    lead.linear_ok("save_issue_status", json!({ "id": id, "state": "Done" }))
        .await;
    lead.linear_ok(
        "post_issue_event",
        json!({ "issueId": id, "stage": "owner-verified" }),
    )
    .await;
    let issue = owner_call(&w.stack, "get_issue", json!({ "id": id }));
    assert_eq!(issue["issue"]["state"], "Done");
    assert_eq!(issue["issue"]["stateType"], "completed");
    // Lead calls are not counted.
    let b = budgets(&w.stack);
    assert!(
        !b["actors"]
            .as_array()
            .expect("actors")
            .iter()
            .any(|a| a["role"] == "lead"),
        "{b}"
    );
    drop(w.workspace);
}

#[tokio::test(flavor = "multi_thread")]
async fn sixty_writes_a_minute_exactly_under_concurrency() {
    let w = world().await;
    let issue = owner_call(
        &w.stack,
        "save_issue",
        json!({ "team": "ENG", "title": "busy" }),
    );
    let id = issue["issue"]["identifier"]
        .as_str()
        .expect("id")
        .to_string();
    let worker = tracker_seat(&w.stack, w.dir.path(), "worker", "alpha", "worker").await;
    let batch: Vec<Value> = (0..64)
        .map(|i| json!({ "call": "linear_save_comment", "args": { "issueId": id, "body": format!("note {i}") } }))
        .collect();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let results = worker.run(json!({ "batch": batch })).await;
    let results = results.as_array().expect("results");
    let ok = results.iter().filter(|r| r["isError"] == false).count();
    let refused: Vec<&Value> = results.iter().filter(|r| r["isError"] == true).collect();
    // Every call was answered: none is left "uncertain" by a lost reply.
    let lost: Vec<&Value> = results
        .iter()
        .filter(|r| r["result"]["outcome"] == "uncertain")
        .collect();
    assert!(lost.is_empty(), "{lost:?}");
    assert_eq!(ok, 60, "exactly 60 writes pass: {}", budgets(&w.stack));
    assert_eq!(refused.len(), 4);
    for r in &refused {
        assert_eq!(code(r), "tracker_request_budget", "{r}");
        let e = &r["result"]["error"];
        let retry_at = e["retryAtMs"].as_i64().expect("retryAtMs");
        let after = e["retryAfterMs"].as_i64().expect("retryAfterMs");
        assert!(
            e["retryAt"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{e}"
        );
        // The window opens a minute after the first counted write.
        assert!(
            retry_at >= before + 60_000 - 1 && retry_at <= before + 61_000 + 30_000,
            "{e}"
        );
        assert!(after > 0 && after <= 60_000, "{e}");
    }
    // The store holds exactly the 60.
    let comments = owner_call(
        &w.stack,
        "list_comments",
        json!({ "issueId": id, "limit": 250 }),
    );
    assert_eq!(comments["comments"].as_array().expect("comments").len(), 60);
    // Reads still pass; the background class has its own budget.
    worker.linear_ok("get_issue", json!({ "id": id })).await;
    let bg: Vec<Value> = (0..5)
        .map(|i| json!({ "call": "linear_save_comment", "args": { "issueId": id, "body": format!("bg {i}") }, "background": true }))
        .collect();
    let bg = worker.run(json!({ "batch": bg })).await;
    assert!(
        bg.as_array()
            .expect("bg")
            .iter()
            .all(|r| r["isError"] == false),
        "{bg}"
    );
    let still = worker
        .linear("save_comment", json!({ "issueId": id, "body": "one more" }))
        .await;
    assert_eq!(code(&still), "tracker_request_budget");
    let b = budgets(&w.stack);
    assert_eq!(b["writesPerMinute"], 60);
    assert_eq!(b["requestsPerHour"], 600);
    let inter = actor_budget(&b, "worker", "interactive");
    assert_eq!(inter["writes"]["used"], 60, "{inter}");
    assert_eq!(
        inter["requests"]["used"], 61,
        "refused calls are not counted: {inter}"
    );
    assert_eq!(inter["refused"], 5);
    let back = actor_budget(&b, "worker", "background");
    assert_eq!(back["writes"]["used"], 5);
    // The owner is never counted and still writes.
    owner_call(
        &w.stack,
        "save_comment",
        json!({ "issueId": id, "body": "owner" }),
    );
    let doctor = w.stack.clankie(&["doctor", "--json"]);
    let doctor = json_of(&String::from_utf8_lossy(&doctor.stdout));
    assert_eq!(doctor["trackerBudgets"]["writesPerMinute"], 60, "{doctor}");
    let work = json_of(&w.stack.clankie_ok(&["work", "status", "--json"]));
    assert!(
        work["trackerBudgets"]["actors"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["refused"] == 5)),
        "{work}"
    );
    // The role profiles, as JSON and as the same figures in text.
    let profiles = json_of(&w.stack.clankie_ok(&["tracker", "profiles", "--json"]));
    let worker = profiles["roles"]
        .as_array()
        .and_then(|r| r.iter().find(|p| p["role"] == "worker"))
        .cloned()
        .unwrap_or_else(|| panic!("{profiles}"));
    assert!(worker["tools"].as_u64().unwrap_or(0) > 0, "{profiles}");
    let text = w.stack.clankie_ok(&["tracker", "profiles"]);
    let line = format!("tools={}", worker["tools"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("worker") && l.contains(&line)),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn list_changes_wakes_within_the_poll_on_a_commit() {
    let w = world().await;
    let first = owner_call(
        &w.stack,
        "save_issue",
        json!({ "team": "ENG", "title": "one" }),
    );
    assert_eq!(first["issue"]["identifier"], "ENG-1");
    let worker = tracker_seat(&w.stack, w.dir.path(), "worker", "alpha", "worker").await;
    let now = worker.linear_ok("list_changes", json!({})).await;
    let cursor = now["cursor"].as_i64().expect("cursor");
    assert!(cursor > 0);
    // An empty poll waits its time out and costs one request.
    let empty = worker
        .linear_ok("list_changes", json!({ "cursor": cursor, "waitMs": 300 }))
        .await;
    assert_eq!(empty["changes"].as_array().expect("changes").len(), 0);
    let n = worker.send(json!({
        "mark": true,
        "call": "linear_list_changes",
        "args": { "cursor": cursor, "waitMs": 15000 },
    }));
    wait_json(
        &worker.file(&format!("started.{n}")),
        Duration::from_secs(30),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    owner_call(
        &w.stack,
        "save_issue",
        json!({ "team": "ENG", "title": "two" }),
    );
    let woke = worker.result(n).await;
    assert_eq!(woke["isError"], false, "{woke}");
    let changes = structured(&woke)["changes"].clone();
    assert!(
        changes
            .as_array()
            .is_some_and(|c| !c.is_empty() && c[0]["entity"] == "issue"),
        "{woke}"
    );
    let ms = woke["ms"].as_f64().expect("ms");
    assert!(
        ms < 14_000.0,
        "woke on the commit, not at the deadline: {ms} ms"
    );
    let b = budgets(&w.stack);
    let inter = actor_budget(&b, "worker", "interactive");
    assert_eq!(
        inter["requests"]["used"], 3,
        "one request per poll: {inter}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tracker_survives_kill_9_mid_write() {
    let w = world().await;
    let stack = &w.stack;
    let pid = stack.service_pid("tracker").expect("tracker pid");
    // 40 owner writes, each with its own idempotency key, 8 at a time,
    // while the tracker is killed partway.
    let clankie = bin_dir().join("clankie");
    let state = stack.state.path().to_path_buf();
    let writer = std::thread::spawn(move || {
        let mut outcomes = Vec::new();
        for chunk in (0..40).collect::<Vec<_>>().chunks(8) {
            let children: Vec<_> = chunk
                .iter()
                .map(|i| {
                    std::process::Command::new(&clankie)
                        .args([
                            "tracker",
                            "call",
                            "save_issue",
                            &json!({ "team": "ENG", "title": format!("w{i}"), "idempotencyKey": format!("k{i}") })
                                .to_string(),
                        ])
                        .env("CLANKIE_STATE", &state)
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .expect("spawn")
                })
                .collect();
            for c in children {
                let out = c.wait_with_output().expect("wait");
                outcomes.push(String::from_utf8_lossy(&out.stdout).to_string());
            }
        }
        outcomes
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
    let outcomes = tokio::task::spawn_blocking(move || writer.join().expect("writer"))
        .await
        .expect("join");
    let acknowledged: Vec<String> = outcomes
        .iter()
        .filter_map(|o| serde_json::from_str::<Value>(o).ok())
        .filter(|v| v["outcome"] == "ok")
        .filter_map(|v| v["result"]["issue"]["title"].as_str().map(str::to_string))
        .collect();
    // The supervisor restarts the tracker; the database opens cleanly.
    let back = clankie_tests::eventually(Duration::from_secs(20), async || {
        let restarted = stack.service_pid("tracker").is_some_and(|p| p != pid);
        let answers = || {
            stack
                .clankie(&["tracker", "call", "list_teams", "{}"])
                .status
                .success()
        };
        (restarted && answers()).then_some(())
    })
    .await;
    assert!(back.is_some(), "the tracker came back");
    // Every acknowledged write is there; retrying every key writes the rest
    // exactly once.
    for i in 0..40 {
        owner_call(
            stack,
            "save_issue",
            json!({ "team": "ENG", "title": format!("w{i}"), "idempotencyKey": format!("k{i}") }),
        );
    }
    let list = owner_call(stack, "list_issues", json!({ "team": "ENG", "limit": 250 }));
    let mut titles: Vec<String> = list["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .filter_map(|i| i["title"].as_str().map(str::to_string))
        .collect();
    titles.sort();
    let mut expected: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    expected.sort();
    assert_eq!(titles, expected, "each write exactly once");
    for t in &acknowledged {
        assert!(titles.contains(t));
    }
    let db = stack.state.path().join("tracker/tracker.db");
    let conn = rusqlite::Connection::open(&db).expect("open db");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity");
    assert_eq!(check, "ok");
    let creates: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM changes WHERE entity = 'issue' AND action = 'create'",
            [],
            |r| r.get(0),
        )
        .expect("changes");
    assert_eq!(creates, 40, "the change log matches the rows");
}

/// A stand-in for Linear's MCP server (the real one is out of reach here):
/// it answers Linear's tool names and marks every answer as its own, and
/// knows beta's Linear project.
/// Binds `project` (at revision 1) to the Linear project the stand-in
/// knows.
fn bind_linear(stack: &Stack, project: &str) {
    stack.clankie_ok(&[
        "project",
        "set",
        project,
        "--revision",
        "1",
        "--tracker",
        "linear",
        "--linear-project",
        LINEAR_PROJECT,
    ]);
}

const LINEAR_PROJECT: &str = "0e4f6a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b";

fn connect_standin(stack: &Stack, log: &Path) {
    let projects = [("STANDIN_PROJECTS", LINEAR_PROJECT)];
    stack.connect_standin("linear", log, &projects);
}

#[tokio::test(flavor = "multi_thread")]
async fn linear_calls_route_by_repo_item_and_hire() {
    let w = world().await;
    let stack = &w.stack;
    let standin_log = w.dir.path().join("standin.log");
    connect_standin(stack, &standin_log);
    // A cut-over team with an imported issue, and one made here since.
    stack.clankie_ok(&["tracker", "team", "VUH", "--name", "Vuh", "--cut-over"]);
    let uuid = "5b1c7d4e-8f9a-4b2c-9d3e-0f1a2b3c4d5e";
    stack.clankie_ok(&[
        "tracker", "import", "VUH", "VUH-12", "--uuid", uuid, "--title", "imported",
    ]);
    let local = owner_call(
        stack,
        "save_issue",
        json!({ "team": "VUH", "title": "made here" }),
    );
    assert_eq!(local["issue"]["identifier"], "LOCAL-VUH-1");
    owner_call(
        stack,
        "save_issue",
        json!({ "team": "ENG", "title": "eng work" }),
    );

    // Projects: beta bound to Linear; gamma unbound with no conventions;
    // delta unbound with every workspace's convention linear.
    let folders: Vec<_> = ["beta", "gamma", "delta"]
        .into_iter()
        .map(|name| (name, stack.add_project(name, &[])))
        .collect();
    bind_linear(stack, "beta");
    let delta_ws = folders[2].1.path().display().to_string();
    stack.clankie_ok(&[
        "project",
        "set",
        "delta",
        "--revision",
        "1",
        "--convention",
        &format!("{delta_ws}=linear"),
    ]);

    let beta = tracker_seat(stack, w.dir.path(), "beta", "beta", "worker").await;
    // Follows the hire: a Linear project reaches Linear.
    let made = beta
        .linear_ok(
            "save_issue",
            json!({ "team": "ENG", "title": "for linear" }),
        )
        .await;
    assert_eq!(made["source"], "linear-standin", "{made}");
    // An item of the cut-over team goes to the built-in store whatever the hire.
    let imported = beta.linear_ok("get_issue", json!({ "id": "VUH-12" })).await;
    assert_eq!(imported["issue"]["title"], "imported", "{imported}");
    let by_uuid = beta.linear_ok("get_issue", json!({ "id": uuid })).await;
    assert_eq!(by_uuid["issue"]["identifier"], "VUH-12", "{by_uuid}");
    beta.linear_ok(
        "save_comment",
        json!({ "issueId": "LOCAL-VUH-1", "body": "from a linear hire" }),
    )
    .await;
    let comments = owner_call(stack, "list_comments", json!({ "issueId": "LOCAL-VUH-1" }));
    assert_eq!(comments["comments"].as_array().expect("c").len(), 1);
    // linearHistory reads the frozen copy, marked as history.
    let history = beta
        .linear_ok(
            "get_issue",
            json!({ "id": "VUH-12", "linearHistory": true }),
        )
        .await;
    assert_eq!(history["source"], "linear-standin");
    assert_eq!(history["linearHistory"], true, "{history}");
    // A Linear-native write naming the item is refused with a pointer.
    let graphql = beta
        .run(json!({ "call": "linear_graphql", "args": { "query": "mutation { commentCreate(input: {issueId: \"VUH-12\", body: \"x\"}) { success } }" } }))
        .await;
    assert_eq!(code(&graphql), "tracker_cut_over", "{graphql}");
    assert!(
        graphql.to_string().contains("linear_save_comment"),
        "{graphql}"
    );
    // An explicit repo wins over the hire.
    let eng = beta
        .linear_ok("get_issue", json!({ "id": "ENG-1", "repo": "alpha" }))
        .await;
    assert_eq!(eng["issue"]["title"], "eng work", "{eng}");
    let unknown = beta
        .linear("get_issue", json!({ "id": "ENG-1", "repo": "nowhere" }))
        .await;
    assert_eq!(code(&unknown), "tracker_route_unavailable", "{unknown}");

    // A built-in project's hire cannot reach Linear's own tools.
    let alpha = tracker_seat(stack, w.dir.path(), "alpha", "alpha", "worker").await;
    let graphql = alpha
        .run(json!({ "call": "linear_graphql", "args": { "query": "{ viewer { id } }" } }))
        .await;
    assert_eq!(code(&graphql), "tracker_cut_over", "{graphql}");
    let eng_list = alpha
        .linear_ok("list_issues", json!({ "team": "ENG" }))
        .await;
    assert!(eng_list["issues"].is_array(), "{eng_list}");

    // No binding and no linear conventions: refused.
    let gamma = tracker_seat(stack, w.dir.path(), "gamma", "gamma", "worker").await;
    let refused = gamma
        .linear("save_issue", json!({ "team": "ENG", "title": "lost" }))
        .await;
    assert_eq!(code(&refused), "tracker_route_unavailable", "{refused}");
    assert!(
        refused.to_string().contains("project set"),
        "points at the fix: {refused}"
    );
    // All workspaces' conventions linear: Linear.
    let delta = tracker_seat(stack, w.dir.path(), "delta", "delta", "worker").await;
    let d = delta.linear_ok("list_issues", json!({})).await;
    assert_eq!(d["source"], "linear-standin", "{d}");
    // What reached the stand-in never carried the routing arguments.
    let seen = std::fs::read_to_string(&standin_log).unwrap_or_default();
    assert!(
        !seen.contains("linearHistory") && !seen.contains("\"repo\""),
        "{seen}"
    );
    assert!(
        !seen.contains("LOCAL-VUH-1"),
        "the built-in item never reached Linear: {seen}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retired_hire_releases_its_leases_and_leaves_the_state_alone() {
    let w = world().await;
    let issue = owner_call(
        &w.stack,
        "save_issue",
        json!({ "team": "ENG", "title": "half done", "state": "Todo" }),
    );
    let id = issue["issue"]["identifier"]
        .as_str()
        .expect("id")
        .to_string();
    let worker = tracker_seat(&w.stack, w.dir.path(), "worker", "alpha", "worker").await;
    let lease = worker
        .linear_ok("save_lease", json!({ "issueId": id, "ttlMs": 3600000 }))
        .await;
    let holder = lease["lease"]["holder"]
        .as_str()
        .expect("holder")
        .to_string();
    let ready = owner_call(&w.stack, "list_ready_issues", json!({ "team": "ENG" }));
    assert!(
        !ready.to_string().contains(&id),
        "leased, not ready: {ready}"
    );
    let hire_id = worker.hire["hireId"].as_str().expect("hire id");
    assert_eq!(holder, format!("hire:{hire_id}"));
    w.stack.clankie_ok(&["close", hire_id]);
    // Retirement settles the lease under the hire's own name; the issue
    // keeps its state (only the owner verifies completion).
    let events = owner_call(&w.stack, "list_issue_events", json!({ "issueId": id }));
    let released: Vec<&Value> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["stage"] == "released")
        .collect();
    assert_eq!(released.len(), 1, "{events}");
    assert_eq!(released[0]["actor"], holder.as_str());
    let ready = owner_call(&w.stack, "list_ready_issues", json!({ "team": "ENG" }));
    assert!(
        ready.to_string().contains(&id),
        "released, ready again: {ready}"
    );
    let after = owner_call(&w.stack, "get_issue", json!({ "id": id }));
    assert_eq!(after["issue"]["state"], "Todo");
}

/// The doctor's ownership check, as JSON.
fn ownership(stack: &Stack) -> Value {
    let doctor = json_of(&String::from_utf8_lossy(
        &stack.clankie(&["doctor", "--json"]).stdout,
    ));
    doctor["trackerOwnership"].clone()
}

/// A Linear-bound project's hire: Linear keeps no leases, so its lease is
/// held here under the saved route (the verified Linear identity and the
/// project), never sent to Linear. With Linear disconnected a lease is
/// refused, not taken in the local store alone. Retiring the hire releases
/// its route lease under the resource it was taken with, and the doctor's
/// ownership check counts only what a project's hire holds.
#[tokio::test(flavor = "multi_thread")]
async fn a_linear_hires_lease_is_held_for_its_saved_route_and_released_at_retirement() {
    let w = world().await;
    let stack = &w.stack;
    let standin_log = w.dir.path().join("standin.log");
    connect_standin(stack, &standin_log);
    stack.add_project("beta", &[]);
    bind_linear(stack, "beta");
    // The owner's own lease on a built-in issue: held, never attributed.
    owner_call(
        stack,
        "save_issue",
        json!({ "team": "ENG", "title": "owner's" }),
    );
    owner_call(
        stack,
        "save_lease",
        json!({ "issueId": "ENG-1", "ttlMs": 3600000 }),
    );

    let beta = tracker_seat(stack, w.dir.path(), "beta", "beta", "worker").await;
    let hire_id = beta.hire["hireId"].as_str().expect("hire id").to_string();
    let lease = beta
        .linear_ok(
            "save_lease",
            json!({ "issueId": "LIN-7", "ttlMs": 3600000 }),
        )
        .await;
    assert_eq!(
        lease["lease"]["issueId"], "LIN-7",
        "kept as observed: {lease}"
    );
    assert_eq!(lease["lease"]["holder"], format!("hire:{hire_id}"));
    let seen = std::fs::read_to_string(&standin_log).unwrap_or_default();
    assert!(!seen.contains("save_lease"), "never sent to Linear: {seen}");

    let check = ownership(stack);
    let counts = check["counts"].as_object().expect("counts").clone();
    let route_scope = counts
        .keys()
        .find(|k| k.starts_with("linear:user:") && k.ends_with(":beta"))
        .unwrap_or_else(|| panic!("a route scope for beta: {check}"))
        .clone();
    assert_eq!(counts[&route_scope], 1, "{check}");
    assert!(
        counts.get("builtin:ENG").is_none(),
        "the owner's lease is not counted: {check}"
    );
    assert!(
        check["excluded"]
            .as_array()
            .expect("excluded")
            .iter()
            .any(|e| e["holder"] == "owner" && e["why"] == "owner" && e["scope"] == "builtin:ENG"),
        "{check}"
    );

    // Disconnected: refused, and nothing is taken locally instead.
    stack.clankie_ok(&["disconnect", "linear"]);
    let refused = beta
        .linear(
            "save_lease",
            json!({ "issueId": "LIN-8", "ttlMs": 3600000 }),
        )
        .await;
    assert_eq!(code(&refused), "account_unavailable", "{refused}");
    let check = ownership(stack);
    assert_eq!(
        check["counts"][&route_scope], 1,
        "LIN-8 is leased nowhere: {check}"
    );

    // Retired: the route lease is released under its own resource.
    stack.clankie_ok(&["close", &hire_id]);
    let check = ownership(stack);
    assert!(
        check["counts"].get(&route_scope).is_none(),
        "released at retirement: {check}"
    );
    let state = json_of(
        &std::fs::read_to_string(stack.state.path().join("mailbox/state.json")).expect("state"),
    );
    let pending = state["hires"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["hireId"] == hire_id.as_str()))
        .map(|h| h.get("retirePending").cloned());
    assert_eq!(pending, Some(None), "settled: {state}");
}

/// A retirement that finds the tracker down is owed, not lost: the mailbox
/// retries it until the tracker answers, under the same receipts, so the
/// lease is released once and the issue gets one `released` event.
#[tokio::test(flavor = "multi_thread")]
async fn a_retirement_the_tracker_missed_is_retried_with_its_same_receipts() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let w = world().await;
    let issue = owner_call(
        &w.stack,
        "save_issue",
        json!({ "team": "ENG", "title": "interrupted", "state": "Todo" }),
    );
    let id = issue["issue"]["identifier"]
        .as_str()
        .expect("id")
        .to_string();
    let worker = tracker_seat(&w.stack, w.dir.path(), "worker", "alpha", "worker").await;
    worker
        .linear_ok("save_lease", json!({ "issueId": id, "ttlMs": 3600000 }))
        .await;
    let hire_id = worker.hire["hireId"].as_str().expect("hire id");
    // The tracker stops answering; the close's own attempt times out, and
    // the request it sent dies unread with the tracker.
    let tracker = w.stack.service_pid("tracker").expect("tracker pid");
    clankie_tests::pause(tracker);
    w.stack.clankie_ok(&["close", hire_id]);
    let owed = json_of(
        &std::fs::read_to_string(w.stack.state.path().join("mailbox/state.json")).expect("state"),
    );
    let pending = owed["hires"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["hireId"] == hire_id))
        .map(|h| h["retirePending"].clone());
    assert_eq!(pending, Some(json!(true)), "owed after the failed attempt");
    kill(Pid::from_raw(tracker), Signal::SIGKILL).expect("kill");
    assert!(
        w.stack
            .wait_line("tracker restarted", Duration::from_secs(30))
            .await
    );
    // The sweep settles it once the tracker is back.
    let ready = clankie_tests::eventually(Duration::from_secs(60), async || {
        let ready = owner_call(&w.stack, "list_ready_issues", json!({ "team": "ENG" }));
        ready.to_string().contains(&id).then_some(ready)
    })
    .await;
    assert!(ready.is_some(), "released after the retry");
    let events = owner_call(&w.stack, "list_issue_events", json!({ "issueId": id }));
    let released = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["stage"] == "released")
        .count();
    assert_eq!(released, 1, "{events}");
}
