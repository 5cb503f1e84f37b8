//! `clankie doctor` and the roster as diagnostics (seed 003, "Native
//! discovery and diagnostics"), on a real stack with real bridges in real
//! tmux panes: project eligibility apart from tools, native tools verified
//! from what the current bridge process reported, a late report from an
//! older process that cannot overwrite it, bridge presence apart from
//! freshness (`older-than-runtime` after the service restarts), stalled
//! calls with their real reason, and an upstream that cannot start.

use std::time::Duration;

use clankie_tests::seat::Seat;
use clankie_tests::{Stack, eventually};
use serde_json::{Value, json};

fn json_of(out: &[u8]) -> Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(out)))
}

/// `clankie doctor --json`, whatever its verdict.
fn doctor(stack: &Stack) -> Value {
    json_of(&stack.clankie(&["doctor", "--json"]).stdout)
}

fn seat_in<'a>(doctor: &'a Value, pane: &str) -> Option<&'a Value> {
    doctor["seats"]
        .as_array()?
        .iter()
        .find(|s| s["paneId"] == pane)
}

fn pane_of(seat: &Seat) -> String {
    seat.ready["paneId"]
        .as_str()
        .or_else(|| seat.hire["paneId"].as_str())
        .unwrap_or_else(|| panic!("no pane: {} {}", seat.ready, seat.hire))
        .to_string()
}

/// Waits until doctor shows the seat in `pane` satisfying `ok`.
async fn wait_seat(stack: &Stack, pane: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let seen = eventually(Duration::from_secs(60), async || {
        last = doctor(stack);
        seat_in(&last, pane).filter(|s| ok(s)).cloned()
    })
    .await;
    seen.unwrap_or_else(|| panic!("{what}: {last}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_tells_each_seats_eligibility_tools_bridge_and_stalled_calls_apart() {
    let stack = Stack::start().await.expect("stack");
    let tmux = stack.link_tmux("work");
    let _ws = stack.add_project("alpha", &[]);
    let conv = stack.add_lead("Lead");
    let edge_log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &edge_log, &[]);
    let dir = tempfile::tempdir().expect("dir");
    let worker = Seat::hire(&stack, dir.path(), "w", &conv).await;
    let hand = Seat::by_hand(&stack, &tmux, dir.path(), "hand").await;
    let (worker_pane, hand_pane) = (pane_of(&worker), pane_of(&hand));

    // Both bridges reported what they serve: verified, present, current.
    let verified = |s: &Value| {
        s["nativeTools"] == "verified"
            && s["bridge"]["present"] == true
            && s["bridge"]["freshness"] == "current"
    };
    let w = wait_seat(&stack, &worker_pane, "the worker verified", verified).await;
    assert_eq!(w["eligibility"]["state"], "project", "{w}");
    assert_eq!(w["projectId"], worker.hire["projectId"], "{w}");
    assert_eq!(w["workerTools"]["missing"], json!([]), "{w}");
    assert_eq!(
        w["workerTools"]["served"], w["workerTools"]["reported"],
        "{w}"
    );
    assert!(
        w["workerTools"]["served"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "message_clankie")),
        "{w}"
    );
    // No project proof is no project eligibility, and never fewer tools.
    let h = wait_seat(&stack, &hand_pane, "the hand seat verified", verified).await;
    assert_eq!(h["eligibility"]["state"], "unproven", "{h}");
    assert_eq!(h["eligibility"]["deniesFleetTools"], false, "{h}");
    assert_eq!(h["hireId"], Value::Null, "{h}");

    // A late report from an older process in the pane (the harness, which
    // started its bridge) naming other tools never overwrites the bridge's
    // cohort.
    let late = worker
        .run(json!({ "http": ["GET", "/v1/fleet/seats/{pane}/mailbox?wait=0&tools=message_clankie", null] }))
        .await;
    assert_eq!(late["status"], 200, "{late}");
    let after = doctor(&stack);
    let w = seat_in(&after, &worker_pane).expect("worker seat");
    assert_eq!(w["nativeTools"], "verified", "{after}");
    assert_eq!(w["bridge"]["cohorts"], 1, "{after}");
    assert_eq!(w["workerTools"]["missing"], json!([]), "{after}");

    // Proofs and the helper's queue are reported.
    let proofs = &after["localProofs"];
    assert_eq!(proofs["known"], true, "{after}");
    assert!(proofs["helperQueueDepth"].is_u64(), "{after}");
    assert!(proofs["msSinceLastGoodProof"].is_i64(), "{after}");
    assert_eq!(after["healthy"], true, "{after}");

    // A call whose upstream dies after dispatch is a stalled call of that
    // seat, with its real reason.
    let n = worker.send(json!({ "tool": "clankie_call", "args": {
        "name": "edge_hang", "receiptId": "stall-000001", "arguments": { "tag": "stall" } } }));
    eventually(Duration::from_secs(60), async || {
        std::fs::read_to_string(&edge_log)
            .ok()?
            .contains("stall")
            .then_some(())
    })
    .await
    .expect("the hanging call reached its upstream");
    let host = stack.service_pid("mcp-host").expect("mcp-host");
    for pid in Stack::children_matching(host, "edge_server") {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let answer = worker.result(n).await;
    assert!(answer.to_string().contains("uncertain"), "{answer}");
    let w = wait_seat(&stack, &worker_pane, "a stalled call", |s| {
        s["workerTools"]["stalledCalls"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    })
    .await;
    let stalled = &w["workerTools"]["stalledCalls"][0];
    assert_eq!(stalled["state"], "uncertain", "{w}");
    assert!(
        stalled["reason"]
            .as_str()
            .is_some_and(|r| r.contains("after dispatch")),
        "{w}"
    );
    let h = seat_in(&doctor(&stack), &hand_pane).cloned().expect("hand");
    assert_eq!(h["workerTools"]["stalledCalls"], json!([]), "{h}");

    // Restarted, the mailbox sees the same bridges come back: present, and
    // older than the running service (a reload hint), in doctor and roster.
    stack.kill_restarted("mailbox").await;
    wait_seat(&stack, &worker_pane, "older-than-runtime", |s| {
        s["bridge"]["present"] == true && s["bridge"]["freshness"] == "older-than-runtime"
    })
    .await;
    let roster: Value = json_of(stack.clankie_ok(&["roster", "--json"]).as_bytes());
    let row = roster["hires"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["paneId"] == worker_pane.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("{roster}"));
    assert_eq!(row["bridge"]["freshness"], "older-than-runtime", "{row}");

    // An upstream that cannot stay up is not healthy, with its last error.
    stack.connect_edge("crashy", &edge_log, &[("EDGE_EXIT_AFTER_MS", "300")]);
    let mut last = Value::Null;
    eventually(Duration::from_secs(60), async || {
        last = doctor(&stack);
        last["accounts"].as_array()?.iter().find(|a| {
            a["name"] == "crashy"
                && a["state"] == "unavailable"
                && a["lastError"].as_str().is_some_and(|e| !e.is_empty())
        })?;
        Some(())
    })
    .await
    .unwrap_or_else(|| panic!("crashy never read unavailable: {last}"));
    assert_eq!(last["healthy"], false, "{last}");
}

/// Stock grpcurl (1.8.6, from PyPI) on every service socket: reflection
/// (it speaks v1alpha) lists exactly what that socket serves, `describe`
/// reads the schema, and health answers, all without a credential; a real
/// call without the owner credential is refused, and with the documented
/// header it runs. No extra flag: grpcurl 1.8 sends the socket's path as
/// `:authority`, which the sockets accept (`clankie_runtime::authority`).
#[tokio::test(flavor = "multi_thread")]
async fn stock_grpcurl_lists_describes_and_checks_every_socket() {
    let stack = Stack::start().await.expect("stack");
    let grpcurl = clankie_tests::peers().join("venv/bin/grpcurl");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&grpcurl)
            .args(["-plaintext", "-unix"])
            .args(args)
            .output()
            .expect("grpcurl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let paths = stack.paths();
    for service in clankie_runtime::Service::BACKENDS {
        let socket = service.socket(&paths).display().to_string();
        let (ok, listed) = run(&[&socket, "list"]);
        assert!(ok, "{service}: {listed}");
        let mut names: Vec<&str> = listed.lines().collect();
        names.sort();
        // Its own service, the metrics scrape every service serves, health.
        let mut expected = vec![
            service.health_name(),
            "clankie.telemetry.v1.Telemetry",
            "grpc.health.v1.Health",
        ];
        expected.sort();
        assert_eq!(names, expected, "{service}");
        let (ok, described) = run(&[&socket, "describe", service.health_name()]);
        assert!(
            ok && described.contains("is a service"),
            "{service}: {described}"
        );
        let (ok, health) = run(&[&socket, "grpc.health.v1.Health/Check"]);
        assert!(ok && health.contains("SERVING"), "{service}: {health}");
        // grpcurl 1.8 speaks reflection v1alpha; grpcio asks v1.
        let v1 = reflection_v1(&socket);
        let mut v1: Vec<&str> = v1.lines().collect();
        v1.sort();
        assert_eq!(v1, expected, "{service} over reflection v1");
    }
    let tracker = clankie_runtime::Service::Tracker
        .socket(&paths)
        .display()
        .to_string();
    let (ok, refused) = run(&["-d", "{}", &tracker, "clankie.tracker.v1.Tracker/Ownership"]);
    assert!(!ok && refused.contains("PermissionDenied"), "{refused}");
    let owner = std::fs::read_to_string(stack.state.path().join("owner.token")).expect("token");
    let header = format!("authorization: Bearer {}", owner.trim());
    let (ok, answered) = run(&[
        "-H",
        &header,
        "-d",
        "{}",
        &tracker,
        "clankie.tracker.v1.Tracker/Ownership",
    ]);
    assert!(ok, "{answered}");
}

/// The services a socket lists over `grpc.reflection.v1`, asked by grpcio
/// with a hand-encoded `list_services` request (field 7, empty), one name a
/// line: each name is read from the response's `ServiceResponse.name`.
fn reflection_v1(socket: &str) -> String {
    const SCRIPT: &str = r#"
import sys, grpc
def varint(b, i):
    n = s = 0
    while True:
        c = b[i]; i += 1; n |= (c & 0x7f) << s; s += 7
        if c < 0x80: return n, i
def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        if key & 7 == 2:
            n, i = varint(b, i); yield key >> 3, b[i:i + n]; i += n
        elif key & 7 == 0:
            _, i = varint(b, i)
        else:
            raise SystemExit("unexpected wire type %d" % (key & 7))
ch = grpc.insecure_channel("unix:" + sys.argv[1])
call = ch.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
for resp in call(iter([b"\x3a\x00"]), timeout=10):
    for f, v in fields(resp):
        if f == 6:
            for g, svc in fields(v):
                for h, name in fields(svc):
                    if h == 1: print(name.decode())
"#;
    let out = std::process::Command::new(clankie_tests::peers().join("venv/bin/python"))
        .args(["-c", SCRIPT, socket])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stack's life from the command line, as an operator runs it:
/// `up --detach` returns once it serves, `logs` reads a service's log (and
/// refuses a name that is none), `down` stops it and waits, and what
/// follows says the stack is down (exit 5, docs/CLI.md).
#[tokio::test(flavor = "multi_thread")]
async fn up_detach_logs_and_down() {
    let state = tempfile::Builder::new()
        .prefix("ck")
        .tempdir_in("/tmp")
        .expect("state");
    let clankie = |args: &[&str]| {
        std::process::Command::new(clankie_tests::bin_dir().join("clankie"))
            .arg("--state")
            .arg(state.path())
            .args(args)
            .env("PATH", clankie_tests::peer_path())
            .env("CLANKIE_GATEWAY_ADDR", "127.0.0.1:0")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("clankie")
    };
    let said = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    // A failed assertion must not leave a detached stack behind.
    struct Down<'a>(&'a std::path::Path);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new(clankie_tests::bin_dir().join("clankie"))
                .arg("--state")
                .arg(self.0)
                .arg("down")
                .output();
        }
    }
    let _down = Down(state.path());
    let up = clankie(&["up", "--detach", "--allowed-host", "clankie.example"]);
    assert!(up.status.success(), "{}", said(&up));
    // The gateway answers the name `up` was given, and no other.
    let discovery: Value = serde_json::from_slice(
        &std::fs::read(state.path().join("run/fleet/gateway.json")).expect("discovery"),
    )
    .expect("json");
    let url = discovery["url"].as_str().expect("url");
    for (host, code) in [("clankie.example", 200), ("other.example", 403)] {
        let (status, body) =
            clankie_tests::http(&format!("{url}/healthz"), "GET", &[("Host", host)], "");
        assert_eq!(status, code, "{host}: {body}");
    }
    assert!(
        said(&up).contains("clankie is up in the background"),
        "{}",
        said(&up)
    );
    let status = clankie(&["status", "--json"]);
    assert_eq!(status.status.code(), Some(0), "{}", said(&status));
    let logs = clankie(&["logs", "gateway", "-n", "5"]);
    assert!(
        logs.status.success() && !logs.stdout.is_empty(),
        "{}",
        said(&logs)
    );
    let all = clankie(&["logs", "-n", "1"]);
    assert!(
        said(&all).contains("admission"),
        "each line names its service: {}",
        said(&all)
    );
    let nope = clankie(&["logs", "nope"]);
    assert_eq!(nope.status.code(), Some(4), "{}", said(&nope));
    let again = clankie(&["up", "--detach"]);
    assert!(
        !again.status.success(),
        "one stack per state folder: {}",
        said(&again)
    );

    // A token with an expiry: listed with it, and refused once it passed.
    let created = clankie(&["fleet", "token", "create", "alpha", "--expires-in", "2s"]);
    assert!(created.status.success(), "{}", said(&created));
    let token = String::from_utf8_lossy(&created.stdout).trim().to_string();
    let listed: Value =
        serde_json::from_slice(&clankie(&["fleet", "token", "list", "--json"]).stdout)
            .expect("token list");
    assert!(
        listed["tokens"][0]["expiresAtMs"].as_i64().is_some(),
        "{listed}"
    );
    assert!(
        !listed.to_string().contains(&token),
        "the token itself is never listed"
    );
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "expiry", "version": "0"}}})
    .to_string();
    let auth = format!("Bearer {token}");
    let status = || {
        clankie_tests::http(
            &format!("{url}/mcp"),
            "POST",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            &init,
        )
    };
    let expired = eventually(Duration::from_secs(30), async || {
        let (code, body) = status();
        (code == 401 && body.contains("expired")).then_some(())
    })
    .await;
    assert!(expired.is_some(), "{:?}", status());

    let down = clankie(&["down"]);
    assert!(down.status.success(), "{}", said(&down));
    assert!(
        !state.path().join("run/up.json").exists(),
        "the record is gone"
    );
    let status = clankie(&["status"]);
    assert_eq!(status.status.code(), Some(5), "{}", said(&status));
    let down = clankie(&["down"]);
    assert_eq!(
        down.status.code(),
        Some(5),
        "nothing to stop: {}",
        said(&down)
    );
}
