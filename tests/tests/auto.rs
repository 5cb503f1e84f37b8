//! Projects on Auto end to end: the real stack with the auto-scheduler on a
//! fast tick (rounds every second or so instead of 30 minutes, the idle
//! window scaled with it), real git workspaces, real lead transcripts, and
//! `kill -9` of the real scheduler process.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use clankie_tests::seat::{Harness, Seat};
use clankie_tests::{Stack, StackOptions, eventually};
use serde_json::{Value, json};

const TICK: u64 = 1_000;
const IDLE: u64 = 8_000;

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

async fn stack() -> Stack {
    Stack::start_with(StackOptions {
        auto_tick_ms: Some(TICK),
        auto_idle_ms: Some(IDLE),
        ..Default::default()
    })
    .await
    .expect("stack")
}

use clankie_tests::git::git;

/// A workspace with one commit.
fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("ws");
    git(d.path(), &["init", "-q", "-b", "main"]);
    commit(d.path(), "first");
    d
}

fn commit(ws: &Path, msg: &str) {
    git(ws, &["commit", "-q", "--allow-empty", "-m", msg]);
}

/// The wakes in a conversation's transcript: (wake id, text).
fn wakes(stack: &Stack, conversation: &str) -> Vec<(String, String)> {
    let t = json_of(&stack.clankie_ok(&["transcript", conversation, "--json"]));
    t["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["kind"] == "wake")
        .map(|e| {
            (
                e["receiptId"].as_str().unwrap_or("").to_string(),
                e["text"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

async fn wait_wakes(
    stack: &Stack,
    conversation: &str,
    n: usize,
    within: Duration,
) -> Vec<(String, String)> {
    let enough = eventually(within, async || {
        let w = wakes(stack, conversation);
        (w.len() >= n).then_some(w)
    })
    .await;
    enough.unwrap_or_else(|| {
        let w = wakes(stack, conversation);
        panic!(
            "{conversation} has {} wakes, wanted {n}: {w:?}\n{}",
            w.len(),
            stack.log_tails(&["auto"], 30)
        )
    })
}

fn status(stack: &Stack) -> Value {
    json_of(&stack.clankie_ok(&["auto", "status", "--json"]))
}

fn revision(stack: &Stack, project: &str) -> String {
    let all = json_of(&stack.clankie_ok(&["project", "list", "--json"]));
    all["projects"]
        .as_array()
        .expect("projects")
        .iter()
        .find(|p| p["name"] == project)
        .map(|p| p["revision"].to_string())
        .expect("project")
}

fn set(stack: &Stack, project: &str, flags: &[&str]) -> Value {
    let rev = revision(stack, project);
    let mut args = vec!["project", "set", project, "--revision", &rev];
    args.extend_from_slice(flags);
    json_of(&stack.clankie_ok(&args))
}

fn lead(stack: &Stack, title: &str, flags: &[&str]) -> String {
    let mut args = vec!["lead", "add", title];
    args.extend_from_slice(flags);
    json_of(&stack.clankie_ok(&args))["conversationId"]
        .as_str()
        .expect("id")
        .to_string()
}

fn add_project(stack: &Stack, name: &str, ws: &Path) {
    let ws = ws.display().to_string();
    stack.clankie_ok(&["project", "add", name, "--workspace", &ws]);
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_projects_wake_their_leads_on_a_cadence_the_switch_stops() {
    let stack = stack().await;
    let (a_ws, b_ws) = (repo(), repo());
    add_project(&stack, "alpha", a_ws.path());
    add_project(&stack, "beta", b_ws.path());
    let beta_linear = "0e4f6a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b";
    // A Linear project is bound only once the connected Linear knows it.
    let standin_log = stack.state.path().join("standin.log");
    stack.connect_standin("linear", &standin_log, &[("STANDIN_PROJECTS", beta_linear)]);
    set(&stack, "alpha", &["--tracker", "builtin", "--team", "ENG"]);
    set(
        &stack,
        "beta",
        &["--tracker", "linear", "--linear-project", beta_linear],
    );
    let lead_a = lead(&stack, "Alpha lead", &["--project", "ENG"]);
    let lead_b = lead(&stack, "Beta lead", &["--project", beta_linear]);

    // Owner controls: focus at most 280 characters, revision-fenced.
    let long = "x".repeat(281);
    let rev = revision(&stack, "alpha");
    let out = stack.clankie(&[
        "project",
        "set",
        "alpha",
        "--revision",
        &rev,
        "--focus",
        &long,
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid_argument"),
        "{out:?}"
    );
    let stale = stack.clankie(&["project", "set", "alpha", "--revision", "1", "--auto", "on"]);
    assert!(
        String::from_utf8_lossy(&stale.stderr).contains("stale_revision"),
        "{stale:?}"
    );
    let focus = "y".repeat(280);
    set(&stack, "alpha", &["--auto", "on", "--focus", &focus]);
    set(&stack, "beta", &["--auto", "on"]);

    // The views: the plain one strips the Auto fields; the autonomy one has them.
    let owner = std::fs::read_to_string(stack.state.path().join("owner.token")).expect("token");
    let auth = format!("Bearer {}", owner.trim());
    let (code, plain) = clankie_tests::http(
        &format!("{}/v1/operator/projects", stack.url),
        "GET",
        &[("authorization", &auth)],
        "",
    );
    assert_eq!(code, 200);
    assert!(
        !plain.contains("\"auto\"") && !plain.contains("linearProjectBinding"),
        "{plain}"
    );
    let (code, rich) = clankie_tests::http(
        &format!("{}/v1/operator/projects?includeAutonomy=true", stack.url),
        "GET",
        &[("authorization", &auth)],
        "",
    );
    assert_eq!(code, 200, "{rich}");
    let rich = json_of(&rich);
    assert_eq!(rich["projectsAuto"], true);
    assert_eq!(rich["linearProjectBindings"], true);
    let beta = rich["projects"]
        .as_array()
        .expect("projects")
        .iter()
        .find(|p| p["name"] == "beta")
        .expect("beta");
    assert_eq!(beta["auto"], true);
    assert_eq!(beta["linearProjectBinding"]["projectId"], beta_linear);
    assert_eq!(beta["status"]["leadConversationId"], lead_b.as_str());

    // Off by default: no rounds wake anyone.
    tokio::time::sleep(Duration::from_millis(3 * TICK)).await;
    assert!(wakes(&stack, &lead_a).is_empty());
    stack.clankie_ok(&["auto", "on"]);
    let first_at = Instant::now();
    let a = wait_wakes(&stack, &lead_a, 1, Duration::from_secs(10)).await;
    let b = wait_wakes(&stack, &lead_b, 1, Duration::from_secs(10)).await;
    assert!(
        a[0].1.contains("alpha") && a[0].1.contains(&focus) && !a[0].1.contains("beta"),
        "{a:?}"
    );
    assert!(a[0].1.contains("built-in ENG"), "{a:?}");
    assert!(
        b[0].1.contains("beta") && b[0].1.contains(beta_linear) && !b[0].1.contains("alpha"),
        "{b:?}"
    );
    assert!(
        wakes(&stack, "global-default").is_empty(),
        "owned projects never reach the head"
    );

    // Unchanged evidence: no rewake for several rounds ...
    tokio::time::sleep(Duration::from_millis(4 * TICK)).await;
    assert_eq!(wakes(&stack, &lead_a).len(), 1, "idle suppression");
    // ... a new commit is new evidence: the next round wakes alpha's lead only.
    commit(a_ws.path(), "second");
    let a = wait_wakes(&stack, &lead_a, 2, Duration::from_secs(5)).await;
    assert_ne!(a[0].0, a[1].0);
    assert_eq!(wakes(&stack, &lead_b).len(), 1);
    // The idle window passes: beta, unchanged, is woken once more.
    let b = wait_wakes(&stack, &lead_b, 2, Duration::from_millis(IDLE + 6 * TICK)).await;
    let waited = first_at.elapsed();
    assert!(
        waited >= Duration::from_millis(IDLE - TICK),
        "unchanged evidence rewakes only after the idle window ({waited:?})"
    );
    assert_eq!(b.len(), 2);

    // The switch off stops rounds, even with new evidence.
    stack.clankie_ok(&["auto", "off"]);
    let before = wakes(&stack, &lead_a).len();
    commit(a_ws.path(), "third");
    tokio::time::sleep(Duration::from_millis(4 * TICK)).await;
    assert_eq!(wakes(&stack, &lead_a).len(), before, "off stops rounds");
    // An unreadable switch reads as off.
    stack.clankie_ok(&["auto", "on"]);
    let a = wait_wakes(&stack, &lead_a, before + 1, Duration::from_secs(5)).await;
    std::fs::write(stack.state.path().join("captain/autonomy.json"), b"{torn").expect("corrupt");
    let s = status(&stack);
    assert_eq!(s["autonomy"]["on"], false, "{s}");
    assert_eq!(s["autonomy"]["readable"], false, "{s}");
    commit(a_ws.path(), "fourth");
    tokio::time::sleep(Duration::from_millis(4 * TICK)).await;
    assert_eq!(
        wakes(&stack, &lead_a).len(),
        a.len(),
        "unreadable reads as off"
    );
    let refused = stack.clankie(&["auto", "on"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("auto_state_unreadable"));
    let s = status(&stack);
    assert!(
        s["lastRound"]["skipped"]
            .as_str()
            .unwrap_or("")
            .contains("off"),
        "{s}"
    );
}

/// Project `alpha` (a git workspace, built-in team ENG) on Auto, owned by
/// a new lead chat: (its workspace, the lead's conversation).
fn alpha_on_auto(stack: &Stack) -> (tempfile::TempDir, String) {
    let ws = repo();
    add_project(stack, "alpha", ws.path());
    set(
        stack,
        "alpha",
        &["--tracker", "builtin", "--team", "ENG", "--auto", "on"],
    );
    let conv = lead(stack, "Alpha lead", &["--project", "ENG"]);
    (ws, conv)
}

/// The scheduler's pid.
fn auto_pid(stack: &Stack) -> i32 {
    stack.service_pid("auto").expect("auto pid")
}

async fn restarted(stack: &Stack, old: i32) -> i32 {
    eventually(Duration::from_secs(10), async || {
        let p = stack.service_pid("auto").filter(|p| *p != old)?;
        let status = stack.clankie(&["auto", "status", "--json"]).status;
        status.success().then_some(p)
    })
    .await
    .expect("the scheduler did not come back")
}

fn cadence(stack: &Stack) -> Value {
    json_of(
        &std::fs::read_to_string(stack.state.path().join("auto-rounds/cadence.json"))
            .expect("cadence"),
    )
}

fn journal(stack: &Stack) -> Vec<Value> {
    std::fs::read_to_string(stack.state.path().join("auto-rounds/journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_at_each_step_never_wakes_twice_or_loses_a_fence() {
    let stack = stack().await;
    let (ws, conv) = alpha_on_auto(&stack);
    stack.clankie_ok(&["auto", "on"]);
    wait_wakes(&stack, &conv, 1, Duration::from_secs(10)).await;
    let marker = |step: &str| {
        stack
            .state
            .path()
            .join(format!("auto-rounds/crash-once-{step}"))
    };

    for (i, step) in ["reserved-deadline", "reserved-delivery", "sent-wake"]
        .into_iter()
        .enumerate()
    {
        let pid = auto_pid(&stack);
        let before = wakes(&stack, &conv);
        std::fs::write(marker(step), b"").expect("marker");
        commit(ws.path(), &format!("change {i}"));
        // The scheduler aborts at the step; the supervisor restarts it.
        let new = restarted(&stack, pid).await;
        assert!(
            !marker(step).exists(),
            "{step}: the crash point was reached"
        );
        // Let it settle for a few rounds.
        tokio::time::sleep(Duration::from_millis(4 * TICK)).await;
        let after = wakes(&stack, &conv);
        let mut ids: Vec<&String> = after.iter().map(|(id, _)| id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), after.len(), "{step}: no wake id twice");
        let new_wakes = after.len() - before.len();
        match step {
            // Nothing was reserved for the lead yet: the next round wakes.
            "reserved-deadline" => assert_eq!(new_wakes, 1, "{step}: {after:?}"),
            // Reserved but unknown: fenced for the idle window, never sent twice.
            "reserved-delivery" => assert_eq!(new_wakes, 0, "{step}: fenced, {after:?}"),
            // Accepted before the crash: reconciled, not sent again.
            _ => assert_eq!(new_wakes, 1, "{step}: {after:?}"),
        }
        let c = cadence(&stack);
        let fence = &c["leads"][&conv];
        assert!(fence["pending"].is_null(), "{step}: reconciled: {c}");
        assert!(
            !fence["acceptedFingerprint"]
                .as_str()
                .unwrap_or("")
                .is_empty()
        );
        assert_eq!(auto_pid(&stack), new, "{step}: no crash loop");
    }

    // An overdue start checks once: stop the scheduler past several
    // deadlines, then kill it; the new one runs one round promptly.
    let pid = auto_pid(&stack);
    clankie_tests::pause(pid);
    tokio::time::sleep(Duration::from_millis(5 * TICK)).await;
    let rounds_before = journal(&stack)
        .iter()
        .filter(|l| l["event"] == "round")
        .count();
    let killed_at = now_ms();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
    restarted(&stack, pid).await;
    let rounds_after = || {
        journal(&stack)
            .into_iter()
            .filter(|l| l["event"] == "round")
            .skip(rounds_before)
            .collect::<Vec<Value>>()
    };
    // The overdue round comes promptly ...
    let end = Instant::now() + Duration::from_secs(10);
    while rounds_after().is_empty() {
        assert!(Instant::now() < end, "the overdue start checked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ... and alone: the missed deadlines do not follow it within a tick.
    tokio::time::sleep(Duration::from_millis(TICK / 2)).await;
    let rounds = rounds_after();
    assert_eq!(rounds.len(), 1, "one prompt round, not a burst: {rounds:?}");
    let next = cadence(&stack)["nextDeadlineMs"].as_i64().expect("next");
    assert!(
        next > killed_at,
        "missed intervals coalesced: the next deadline is ahead"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_cadence_stops_auto_checks_with_a_diagnostic() {
    let stack = stack().await;
    let ws = repo();
    add_project(&stack, "alpha", ws.path());
    set(&stack, "alpha", &["--auto", "on"]);
    stack.clankie_ok(&["auto", "on"]);
    wait_wakes(&stack, "global-default", 1, Duration::from_secs(10)).await;
    let path = stack.state.path().join("auto-rounds/cadence.json");
    let pid = auto_pid(&stack);
    // Stopped first: a running scheduler may rename its own cadence over
    // the corrupt bytes between the write and the kill.
    clankie_tests::pause(pid);
    std::fs::write(&path, b"{\"version\": 1, \"nextDead").expect("corrupt");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
    restarted(&stack, pid).await;
    let rounds = journal(&stack).len();
    commit(ws.path(), "new evidence");
    tokio::time::sleep(Duration::from_millis(4 * TICK)).await;
    let s = status(&stack);
    assert!(
        s["cadenceProblem"]
            .as_str()
            .is_some_and(|p| p.contains("cadence.json")),
        "a clear diagnostic: {s}"
    );
    assert_eq!(journal(&stack).len(), rounds, "no Auto checks");
    assert_eq!(wakes(&stack, "global-default").len(), 1);
    assert_eq!(
        std::fs::read(&path).expect("kept"),
        b"{\"version\": 1, \"nextDead",
        "the fences are not discarded"
    );
    let refused = stack.clankie(&["auto", "status"]);
    assert!(String::from_utf8_lossy(&refused.stdout).contains("no Auto checks"));
    // Removing the file lets the scheduler start over from the journal.
    std::fs::remove_file(&path).expect("rm");
    wait_wakes(&stack, "global-default", 2, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rounds_and_hires_follow_explicit_ownership_and_staffing_asks_full_autonomy() {
    let stack = stack().await;
    let tmux = stack.link_tmux("work");
    // The reversed-workspace case: each lead's folder is the other project's.
    let (work_ws, research_ws, gamma_ws, delta_ws) = (repo(), repo(), repo(), repo());
    add_project(&stack, "work", work_ws.path());
    add_project(&stack, "research", research_ws.path());
    add_project(&stack, "gamma", gamma_ws.path());
    add_project(&stack, "delta", delta_ws.path());
    set(
        &stack,
        "work",
        &["--tracker", "builtin", "--team", "WORK", "--auto", "on"],
    );
    set(
        &stack,
        "research",
        &["--tracker", "builtin", "--team", "RES", "--auto", "on"],
    );
    set(&stack, "gamma", &["--auto", "on"]);
    set(&stack, "delta", &["--auto", "on"]);
    let research_folder = research_ws.path().display().to_string();
    let work_folder = work_ws.path().display().to_string();
    let gamma_folder = gamma_ws.path().display().to_string();
    let c_work = lead(
        &stack,
        "Work",
        &["--workspace", &research_folder, "--project", "WORK"],
    );
    let c_res = lead(
        &stack,
        "Research",
        &["--workspace", &work_folder, "--project", "RES"],
    );
    // An unconfigured lead in gamma's folder takes gamma by workspace.
    let c_gamma = lead(&stack, "Gamma", &["--workspace", &gamma_folder]);
    stack.clankie_ok(&["auto", "on"]);
    let w = wait_wakes(&stack, &c_work, 1, Duration::from_secs(10)).await;
    let r = wait_wakes(&stack, &c_res, 1, Duration::from_secs(10)).await;
    let g = wait_wakes(&stack, &c_gamma, 1, Duration::from_secs(10)).await;
    let h = wait_wakes(&stack, "global-default", 1, Duration::from_secs(10)).await;
    assert!(
        w[0].1.contains("- work") && !w[0].1.contains("research"),
        "{w:?}"
    );
    assert!(
        r[0].1.contains("- research") && !r[0].1.contains("- work"),
        "{r:?}"
    );
    assert!(g[0].1.contains("- gamma"), "{g:?}");
    assert!(
        h[0].1.contains("- delta") && !h[0].1.contains("gamma"),
        "{h:?}"
    );

    // Hire attribution follows the same ownership.
    let cross = stack.clankie(&[
        "hire",
        "--conversation",
        &c_work,
        "--project",
        "research",
        "--",
        "sleep",
        "600",
    ]);
    assert!(
        String::from_utf8_lossy(&cross.stderr).contains("not_owner"),
        "{cross:?}"
    );
    let own =
        json_of(&stack.clankie_ok(&["hire", "--conversation", &c_work, "--", "sleep", "600"]));
    let work_id = json_of(&stack.clankie_ok(&["project", "list", "--json"]))["projects"]
        .as_array()
        .expect("projects")
        .iter()
        .find(|p| p["name"] == "work")
        .map(|p| p["projectId"].clone())
        .expect("work");
    assert_eq!(own["projectId"], work_id);
    let two = lead(&stack, "Both", &["--project", "WORK", "--project", "RES"]);
    let ambiguous = stack.clankie(&["hire", "--conversation", &two, "--", "sleep", "600"]);
    assert!(
        String::from_utf8_lossy(&ambiguous.stderr).contains("several"),
        "{ambiguous:?}"
    );

    // Staffing: an autonomous turn hires only with the switch on, the saved
    // level full, the project on Auto and its overrides allowing the work.
    let autonomous = |project: &str| {
        stack.clankie(&[
            "hire",
            "--autonomous",
            "--project",
            project,
            "--",
            "sleep",
            "600",
        ])
    };
    let refusal = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).to_string();
    let r = autonomous("delta");
    assert!(
        refusal(&r).contains("propose_only") && refusal(&r).contains("not full"),
        "{r:?}"
    );
    stack.clankie_ok(&["auto", "level", "full"]);
    assert!(autonomous("delta").status.success(), "allowed");
    set(&stack, "delta", &["--override", "outward=off"]);
    let r = autonomous("delta");
    assert!(refusal(&r).contains("outward"), "{r:?}");
    set(
        &stack,
        "delta",
        &["--auto", "off", "--override", "outward=on"],
    );
    let r = autonomous("delta");
    assert!(refusal(&r).contains("not on Auto"), "{r:?}");
    stack.clankie_ok(&["auto", "off"]);
    let r = autonomous("gamma");
    assert!(refusal(&r).contains("switch is off"), "{r:?}");
    // The status line counts live workers.
    let st = json_of(&stack.clankie_ok(&["project", "status", "--json"]));
    let work = st["projects"]
        .as_array()
        .expect("lines")
        .iter()
        .find(|p| p["name"] == "work")
        .expect("work line");
    assert_eq!(work["agentsWorking"], 1, "{st}");
    assert_eq!(work["landedToday"], 0, "no fetched origin branch");
    drop(tmux);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lead_seat_hears_its_wakes_and_schedules_its_own_until_the_switch_stops_them() {
    let stack = stack().await;
    let _tmux = stack.link_tmux("work");
    let (_ws, conv) = alpha_on_auto(&stack);
    let dir = tempfile::tempdir().expect("dir");
    let seat = Seat::start(
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
    let worker = Seat::start(
        &stack,
        dir.path(),
        "worker",
        Harness::Peer,
        &["--project", "alpha"],
    )
    .await;
    let tools = seat.run(json!({ "list": true })).await;
    let names = tools["tools"].to_string();
    assert!(
        names.contains("get_wake") && names.contains("schedule_wake"),
        "{tools}"
    );
    let worker_tools = worker.run(json!({ "list": true })).await;
    assert!(
        !worker_tools.to_string().contains("get_wake"),
        "{worker_tools}"
    );
    let refused = worker.run(json!({ "tool": "get_wake", "args": {} })).await;
    assert!(
        refused.to_string().contains("role_not_allowed"),
        "{refused}"
    );

    // A round's wake reaches the native lead seat like any message.
    stack.clankie_ok(&["auto", "on"]);
    let w = wait_wakes(&stack, &conv, 1, Duration::from_secs(10)).await;
    assert!(w[0].1.contains("Auto round"));
    assert!(
        seat.inbox_contains("Auto round", Duration::from_secs(20))
            .await,
        "the lead seat heard the wake"
    );
    let state = seat.run(json!({ "tool": "get_wake", "args": {} })).await;
    assert_eq!(state["result"]["switchOn"], true, "{state}");
    assert_eq!(state["result"]["conversationId"], conv.as_str());
    assert!(
        state["result"]["lastWakeAtMs"].as_i64().is_some(),
        "{state}"
    );

    // A self-wake arrives at its time.
    let at = now_ms() + 1_500;
    let s = seat
        .run(json!({ "tool": "schedule_wake", "args": { "atMs": at, "note": "check the CI run" } }))
        .await;
    assert_eq!(s["isError"], false, "{s}");
    assert!(
        seat.inbox_contains("Self-wake: check the CI run", Duration::from_secs(15))
            .await,
        "the self-wake arrived"
    );
    // The switch stops self-wakes: one due while off is held, and none can
    // be scheduled while off.
    let s = seat
        .run(json!({ "tool": "schedule_wake", "args": { "atMs": now_ms() + 1_500, "note": "held" } }))
        .await;
    assert_eq!(s["isError"], false, "{s}");
    stack.clankie_ok(&["auto", "off"]);
    let off = seat
        .run(json!({ "tool": "schedule_wake", "args": { "atMs": now_ms() + 60_000 } }))
        .await;
    assert!(off.to_string().contains("propose_only"), "{off}");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert!(
        !wakes(&stack, &conv).iter().any(|(_, t)| t.contains("held")),
        "no self-wake while off"
    );
    let state = seat.run(json!({ "tool": "get_wake", "args": {} })).await;
    assert_eq!(state["result"]["switchOn"], false);
    assert_eq!(
        state["result"]["scheduled"].as_array().map(Vec::len),
        Some(1)
    );
    stack.clankie_ok(&["auto", "on"]);
    assert!(
        seat.inbox_contains("Self-wake: held", Duration::from_secs(15))
            .await,
        "held until the switch came back on"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_scheduler_owns_the_cadence_and_the_status_line_counts_work() {
    let stack = stack().await;
    // A second scheduler on the same state refuses to start.
    let out = Command::new(clankie_tests::bin_dir().join("clankie-auto"))
        .env("CLANKIE_STATE", stack.state.path())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("second scheduler");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another auto-scheduler"),
        "{out:?}"
    );
    // Landed today: commits on the fetched origin branch since midnight.
    let origin = tempfile::tempdir().expect("origin");
    git(origin.path(), &["init", "-q", "--bare", "-b", "main"]);
    let ws = tempfile::tempdir().expect("ws");
    let origin_url = origin.path().display().to_string();
    let ws_path = ws.path().display().to_string();
    let out = Command::new("git")
        .args(["clone", "-q", &origin_url, &ws_path])
        .output()
        .expect("clone");
    assert!(out.status.success(), "{out:?}");
    commit(ws.path(), "one");
    commit(ws.path(), "two");
    git(ws.path(), &["push", "-q", "origin", "main"]);
    git(ws.path(), &["fetch", "-q", "origin"]);
    commit(ws.path(), "local only");
    add_project(&stack, "work", ws.path());
    set(&stack, "work", &["--tracker", "builtin", "--team", "WORK"]);
    // Needs you: an open ask on one of its issues.
    stack.clankie_ok(&["tracker", "team", "WORK", "--name", "Work"]);
    let issue = json_of(&stack.clankie_ok(&[
        "tracker",
        "call",
        "save_issue",
        r#"{"team":"WORK","title":"decide"}"#,
    ]));
    let id = issue["result"]["issue"]["identifier"].as_str().expect("id");
    stack.clankie_ok(&[
        "tracker",
        "call",
        "post_issue_ask",
        &json!({ "issueId": id, "question": "Which database?" }).to_string(),
    ]);
    let st = json_of(&stack.clankie_ok(&["project", "status", "--json"]));
    let line = &st["projects"][0];
    assert_eq!(line["landedToday"], 2, "{st}");
    assert_eq!(line["needsYou"], 1, "{st}");
    assert_eq!(line["agentsWorking"], 0);
    assert_eq!(st["needsYouTotal"], 1);
}
