//! Real Pi agents as fleet workers: `clankie hire --harness pi` starts Pi
//! (0.87.1, the oldest accepted release, and the newest 1.x) in a pane of
//! a linked tmux session with the worker extension, against a scripted
//! OpenAI-compatible model (`tests/peers/model_server.py`). The model's
//! turns are scripted by the brief the lead sends; everything between is
//! the real stack, the real bridge and the real Pi.

use std::path::Path;
use std::time::Duration;

use clankie_tests::pi::*;
use clankie_tests::seat::json_of;
use clankie_tests::{Stack, eventually, file_lines, python, repo_root};
use serde_json::{Value, json};

/// The lead briefs a Pi worker; Pi's model searches the fleet tools, calls
/// the time through `clankie_call` and reports it with `message_clankie`.
async fn round_trip(version: &str, sandboxed: bool) {
    let f = PiStack::start().await;
    f.stack.connect_stdio("time", &["mcp-server-time"], &[]);
    if sandboxed {
        f.stack
            .clankie_ok(&["fleet", "set", "--worker-sandbox", "on"]);
    }
    let worker = f.hire(version).await;
    assert_eq!(worker.hire["sandboxed"], sandboxed, "{}", worker.hire);
    let delivery = f.brief(
        &worker,
        &[
            r#"CALL clankie_tools {"query": "time"}"#,
            r#"CALL clankie_call {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}}"#,
            r#"CALL message_clankie {"text": "the time: {{last}}"}"#,
            "SAY reported",
        ],
    );
    let report = f
        .lead_hears("the time:", Duration::from_secs(90))
        .await
        .unwrap_or_else(|| {
            panic!(
                "no report reached the lead: {:?}\n{:?}",
                file_lines(&worker.log),
                f.model.requests()
            )
        });
    assert_eq!(report["role"], "agent", "{report}");
    assert_eq!(report["untrusted"], true, "{report}");
    assert!(
        report["text"].as_str().unwrap_or("").contains("UTC"),
        "the time came through clankie_call: {report}"
    );
    let reports: Vec<_> = transcript(&f.stack, &f.lead)
        .into_iter()
        .filter(|e| {
            e["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("the time:"))
        })
        .collect();
    assert_eq!(reports.len(), 1, "once: {reports:?}");

    // The brief's delivery receipt: acknowledged once Pi took it, settled
    // when its run ended.
    let acked = worker.events("delivery.acknowledged");
    assert_eq!(acked.len(), 1, "{acked:?}");
    assert_eq!(acked[0]["deliveryId"], delivery.as_str());
    let settled = eventually(Duration::from_secs(30), async || {
        worker
            .events("delivery.settled")
            .into_iter()
            .find(|e| e["deliveryId"] == delivery.as_str())
    })
    .await;
    assert!(settled.is_some(), "{:?}", file_lines(&worker.log));

    // What Pi showed the model: clankie_call without a top-level anyOf.
    let shown = f.model.requests();
    let call = shown
        .iter()
        .flat_map(|r| r["tools"].as_array().cloned().unwrap_or_default())
        .find(|t| t["name"] == "clankie_call")
        .expect("clankie_call was offered to the model");
    for combiner in ["anyOf", "oneOf", "allOf"] {
        assert!(call["parameters"].get(combiner).is_none(), "{call}");
    }
    assert_eq!(call["parameters"]["type"], "object", "{call}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pi_worker_on_the_oldest_release_reports_the_time_to_its_lead() {
    round_trip(OLDEST, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pi_worker_on_the_newest_release_reports_the_time_to_its_lead() {
    round_trip(NEWEST, false).await;
}

/// The worker sandbox applies to a Pi hire as to any other: Pi runs
/// confined (the stack's state hidden) and still works the brief.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_pi_worker_still_reports_to_its_lead() {
    round_trip(NEWEST, true).await;
}

/// `clankie pi probe` against an installed release: one JSON line.
fn probe(stack: &Stack, pi: &Path, env: &[(&str, &str)]) -> (bool, Value, String) {
    let mut cmd = stack.clankie_cmd(&[
        "pi",
        "probe",
        "--pi",
        &pi.display().to_string(),
        "--node",
        &node().display().to_string(),
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("probe");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line: {stdout}");
    (out.status.success(), json_of(lines[0]), stdout)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_probe_passes_on_both_releases_and_refuses_an_older_one_unrun() {
    let stack = Stack::start().await.expect("stack");
    for version in [OLDEST, NEWEST] {
        let (ok, verdict, _) = probe(&stack, &pi_bin(version), &[]);
        assert!(ok, "{verdict}");
        assert_eq!(verdict["ok"], true, "{verdict}");
        assert_eq!(verdict["release"], version, "{verdict}");
        assert_eq!(
            verdict["surfaces"],
            json!([
                "session",
                "dialog",
                "receipt",
                "follow-up",
                "tool-error",
                "layout"
            ])
        );
    }

    // `accounts --workers` shows the same verdict.
    let workers = json_of(&stack.clankie_ok(&[
        "accounts",
        "--workers",
        "--json",
        "--pi",
        &pi_bin(NEWEST).display().to_string(),
        "--node",
        &node().display().to_string(),
    ]));
    assert_eq!(workers["workers"][0]["harness"], "pi", "{workers}");
    assert_eq!(workers["workers"][0]["hireable"], true, "{workers}");
    assert_eq!(workers["workers"][0]["probe"]["release"], NEWEST);

    // A package whose manifest says 0.86: refused without running any of it.
    let dir = tempfile::tempdir().expect("dir");
    let old = dir.path().join("pi-coding-agent");
    let ran = dir.path().join("ran");
    std::fs::create_dir_all(old.join("dist")).expect("dist");
    std::fs::write(
        old.join("package.json"),
        json!({"name": "@earendil-works/pi-coding-agent", "version": "0.86.1",
               "bin": {"pi": "dist/cli.js"}})
        .to_string(),
    )
    .expect("manifest");
    let marker = format!(
        "require('fs').writeFileSync({:?}, 'ran');",
        ran.display().to_string()
    );
    std::fs::write(old.join("dist/cli.js"), &marker).expect("cli");
    std::fs::write(old.join("dist/index.js"), &marker).expect("index");
    let (ok, verdict, _) = probe(&stack, &old, &[]);
    assert!(!ok);
    assert_eq!(verdict["surface"], "release", "{verdict}");
    assert_eq!(verdict["release"], "0.86.1", "{verdict}");
    // A hire with it is refused the same way, and opens no pane.
    let lead = stack.add_lead("Lead");
    let _tmux = stack.link_tmux("work");
    let _workspace = stack.add_project("alpha", &[]);
    let hire = stack.clankie(&[
        "hire",
        "--project",
        "alpha",
        "--conversation",
        &lead,
        "--harness",
        "pi",
        "--pi",
        &old.display().to_string(),
        "--node",
        &node().display().to_string(),
    ]);
    assert!(!hire.status.success());
    assert!(
        String::from_utf8_lossy(&hire.stderr).contains("harness_release_unsupported"),
        "{}",
        String::from_utf8_lossy(&hire.stderr)
    );
    assert!(!ran.exists(), "nothing of the old release ran");
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    assert!(
        roster.to_string().matches("hireId").count() == 0,
        "no hire: {roster}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_probe_whose_model_never_answers_fails_naming_the_surface() {
    let stack = Stack::start().await.expect("stack");
    // A loopback endpoint that accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let url = format!("http://{}/v1", silent.local_addr().expect("addr"));
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        silent.set_nonblocking(true).expect("nonblocking");
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < until {
            match silent.accept() {
                Ok((c, _)) => conns.push(c),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    });
    let (ok, verdict, _) = probe(
        &stack,
        &pi_bin(NEWEST),
        &[
            ("CLANKIE_PI_PROBE_ENDPOINT", &url),
            ("CLANKIE_PI_PROBE_TIMEOUT_MS", "5000"),
        ],
    );
    assert!(!ok);
    assert_eq!(verdict["ok"], false, "{verdict}");
    assert_eq!(verdict["release"], NEWEST, "{verdict}");
    assert_eq!(verdict["surface"], "follow-up", "{verdict}");
    drop(held);
}

/// Turning fleet tools off withdraws `clankie_call` inside Pi: a call the
/// model still makes is refused there, and nothing reaches the upstream.
#[tokio::test(flavor = "multi_thread")]
async fn a_withdrawn_tool_refuses_inside_pi_before_anything_is_forwarded() {
    let f = PiStack::start().await;
    let log = f.dir.path().join("edge.log");
    f.stack.connect_edge("edge", &log, &[]);
    let worker = f.hire(NEWEST).await;
    f.stack.clankie_ok(&["fleet", "set", "--tools", "off"]);
    let withdrawn = eventually(Duration::from_secs(30), async || {
        worker
            .events("tools.listed")
            .into_iter()
            .find(|e| !e["names"].to_string().contains("clankie_call"))
    })
    .await;
    assert!(withdrawn.is_some(), "{:?}", file_lines(&worker.log));
    f.brief(
        &worker,
        &[r#"CALL clankie_call {"name": "edge_slow", "arguments": {"seconds": 0.1, "tag": "stale"}}"#],
    );
    let results = f.wait_results(1).await;
    assert!(
        results[0].contains("clankie_call"),
        "Pi refused the call: {results:?}"
    );
    assert!(
        worker.events("call.answered").is_empty(),
        "nothing was forwarded"
    );
    assert!(!file_lines(&log).iter().any(|l| l.contains("stale")));
}

/// A killed `clankie mcp --fleet` is not relaunched: the fleet tools are
/// gone from Pi, and a call the model still makes is refused inside Pi.
#[tokio::test(flavor = "multi_thread")]
async fn a_lost_bridge_is_not_relaunched_and_its_tools_are_gone() {
    let f = PiStack::start().await;
    let worker = f.hire(OLDEST).await;
    let bridges = f.bridges(&worker);
    assert_eq!(bridges.len(), 1, "one bridge: {bridges:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(bridges[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the bridge");
    let ended = eventually(Duration::from_secs(30), async || {
        worker.events("fleet.ended").into_iter().next()
    })
    .await
    .unwrap_or_else(|| panic!("{:?}", file_lines(&worker.log)));
    assert!(
        ended["why"]
            .as_str()
            .unwrap_or("")
            .contains("not relaunched"),
        "{ended}"
    );
    f.brief(&worker, &[r#"CALL clankie_tools {"query": "time"}"#]);
    let results = f.wait_results(1).await;
    assert!(results[0].contains("clankie_tools"), "{results:?}");
    assert!(f.bridges(&worker).is_empty(), "no replacement bridge");
}

/// A tool call cancelled in Pi (Escape in its TUI) while the upstream runs
/// it: Pi's result says it may have applied, with the receipt; the
/// upstream ran it once, and the receipt settles.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_call_is_uncertain_with_its_receipt_and_ran_at_most_once() {
    let f = PiStack::start().await;
    let log = f.dir.path().join("edge.log");
    f.stack.connect_edge("edge", &log, &[]);
    let worker = f.hire(NEWEST).await;
    f.brief(
        &worker,
        &[r#"CALL clankie_call {"name": "edge_slow", "arguments": {"seconds": 3, "tag": "pi-cancel"}}"#],
    );
    assert!(
        clankie_tests::wait_file_line(&log, "pi-cancel", Duration::from_secs(60)).await,
        "the call reached the upstream: {:?}",
        file_lines(&worker.log)
    );
    let pane = worker.hire["paneId"].as_str().expect("pane").to_string();
    f.tmux.run(&["send-keys", "-t", &pane, "Escape"]);
    let uncertain = eventually(Duration::from_secs(30), async || {
        worker.events("call.uncertain").into_iter().next()
    })
    .await
    .unwrap_or_else(|| panic!("{:?}", file_lines(&worker.log)));
    let receipt = uncertain["receiptId"]
        .as_str()
        .expect("receipt")
        .to_string();
    assert!(receipt.starts_with("rcpt_"), "{uncertain}");
    // The slow call finishes upstream and its receipt settles; it ran
    // once and is not replayed.
    let audit = f.stack.state.path().join("audit/connected-calls.jsonl");
    let settled = eventually(Duration::from_secs(30), async || {
        file_lines(&audit)
            .into_iter()
            .find(|l| l.contains(&receipt) && l.contains("\"settle\""))
    })
    .await;
    assert!(settled.is_some(), "{:?}", file_lines(&audit));
    let ran = file_lines(&log)
        .iter()
        .filter(|l| l.contains("pi-cancel"))
        .count();
    assert_eq!(ran, 1, "{:?}", file_lines(&log));
    // Pi 1.x says the run was aborted: the lead hears it was interrupted.
    let told = f
        .lead_hears("was interrupted in Pi", Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("{:?}", file_lines(&worker.log)));
    assert_eq!(told["untrusted"], true, "{told}");
}

/// Two Pi workers talk with `message_peer`: each message is delivered to
/// the other's Pi, and the sender's receipt says so honestly.
#[tokio::test(flavor = "multi_thread")]
async fn two_pi_workers_exchange_peer_messages_with_honest_receipts() {
    let f = PiStack::start().await;
    f.stack
        .clankie_ok(&["fleet", "set", "--peer-messages", "on"]);
    let a = f.hire(NEWEST).await;
    let b = f.hire(OLDEST).await;
    let seat = r#"{{lastre:"seatId": ?"([^"]+)"}}"#;
    f.brief(
        &b,
        &[
            "ON hello from a",
            "CALL list_fleet_seats {}",
            &format!(r#"CALL message_peer {{"seat": "{seat}", "text": "hello back from b", "receiptId": "pi-b-1"}}"#),
            "SAY replied",
        ],
    );
    f.brief(
        &a,
        &[
            "CALL list_fleet_seats {}",
            &format!(r#"CALL message_peer {{"seat": "{seat}", "text": "hello from a", "receiptId": "pi-a-1"}}"#),
            "SAY sent",
            "ON hello back from b",
            // The same receipt id reads the first message's receipt again.
            &format!(r#"CALL message_peer {{"seat": "{seat}", "text": "hello from a", "receiptId": "pi-a-1"}}"#),
            r#"CALL message_clankie {"text": "a's receipt: {{last}}"}"#,
            "SAY checked",
        ],
    );
    let report = f
        .lead_hears("a's receipt:", Duration::from_secs(120))
        .await
        .unwrap_or_else(|| {
            panic!(
                "a never reported its receipt:\na {:?}\nb {:?}\nmodel {:?}",
                file_lines(&a.log),
                file_lines(&b.log),
                f.model.requests()
            )
        });
    let text = report["text"].as_str().unwrap_or("");
    assert!(text.contains("delivered"), "honest: b's Pi took it: {text}");
    // Each side took the other's message once and acknowledged it.
    for (w, from) in [(&a, "hello back from b"), (&b, "hello from a")] {
        let acked = w.events("delivery.acknowledged");
        assert!(!acked.is_empty(), "{:?}", file_lines(&w.log));
        let shown: Vec<_> = f
            .model
            .requests()
            .into_iter()
            .filter(|r| r["last"].as_str().is_some_and(|l| l.contains(from)))
            .collect();
        assert!(!shown.is_empty(), "{from} reached a model");
    }
}

/// A Pi author's `submit_for_review` reaches a Pi reviewer, whose Pi reads
/// the candidate and lands its verdict.
#[tokio::test(flavor = "multi_thread")]
async fn a_pi_reviewer_lands_its_verdict_on_a_pi_authors_change() {
    use clankie_tests::git::{commit, patch_id, work_repo};
    let f = PiStack::bare().await;
    let repos = tempfile::tempdir().expect("repos");
    let (work, base) = work_repo(repos.path(), "work");
    commit(&work, &[("src/feature.txt", b"the feature\n")], "feature");
    let expected = patch_id(&work, &base);
    f.stack.clankie_ok(&[
        "project",
        "add",
        "alpha",
        "--workspace",
        &work.display().to_string(),
        "--reviewer",
    ]);
    let author = f.hire(NEWEST).await;
    let reviewer = f.hire_as(OLDEST, "reviewer").await;
    f.brief(
        &reviewer,
        &[
            "ON Review candidate",
            r#"CALL review_candidate {"candidateId": "{{re:cand-[0-9a-f]+}}"}"#,
            r#"CALL review_verdict {"candidateId": "{{re:cand-[0-9a-f]+}}", "patchId": "{{re:(?<=patch-id )[0-9a-f]{40}}}", "verdict": "approve"}"#,
            "SAY approved",
        ],
    );
    f.brief(
        &author,
        &[
            &format!(
                r#"CALL submit_for_review {{"checkout": "{}", "summary": "add the feature"}}"#,
                work.display()
            ),
            "SAY submitted",
        ],
    );
    let stack = &f.stack;
    let approved = eventually(Duration::from_secs(120), async || {
        let listed = json_of(&stack.clankie_ok(&["review", "list", "--json"]));
        listed["candidates"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["state"] == "approved").cloned())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "no verdict landed:\nauthor {:?}\nreviewer {:?}\nmodel {:?}",
            file_lines(&author.log),
            file_lines(&reviewer.log),
            f.model.requests()
        )
    });
    assert_eq!(approved["patchId"], expected.as_str(), "{approved}");
    // The reviewer's Pi read the exact patch before deciding.
    let read = f
        .tool_results()
        .into_iter()
        .find(|r| r.contains("the feature"));
    assert!(read.is_some(), "{:?}", f.tool_results());
}

/// One request to a Herdr socket; its answer.
fn herdr_call(socket: &Path, request: Value) -> Value {
    use std::io::{BufRead as _, Write as _};
    let mut s = std::os::unix::net::UnixStream::connect(socket).expect("herdr");
    s.write_all(format!("{request}\n").as_bytes())
        .expect("write");
    let mut line = String::new();
    std::io::BufReader::new(s)
        .read_line(&mut line)
        .expect("read");
    serde_json::from_str(&line).expect("json")
}

/// Which Pi session a Herdr pane runs is left to Herdr's own Pi
/// integration: Herdr 0.8 keeps a report only from its own source
/// (`herdr:pi`, with a rising `seq`, while it sees Pi in the pane) and
/// answers every other one `ok` while dropping it. The fixture keeps and
/// drops by those rules, and `pane.get` reads back what it kept: the
/// extension reports nothing, a report as Herdr's integration makes it is
/// kept, and one from any other source is dropped.
#[tokio::test(flavor = "multi_thread")]
async fn a_pi_session_is_reported_to_herdr_only_the_way_herdr_keeps_it() {
    let dir = tempfile::tempdir().expect("dir");
    let agents = dir.path().join("agents.json");
    std::fs::write(&agents, r#"{"w1:p1": "pi"}"#).expect("agents");
    let mut herdr = clankie_tests::HerdrFixture::start_seeing(r#"{"w1:p1": 1}"#, &agents).await;
    let tmux = clankie_tests::TmuxServer::start("pi");
    let agent = dir.path().join("agent");
    std::fs::create_dir_all(&agent).expect("agent");
    std::fs::write(
        agent.join("models.json"),
        json!({"providers": {"scripted": {"baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions", "apiKey": "offline", "models": [{"id": "scripted"}]}}})
        .to_string(),
    )
    .expect("models");
    let log = dir.path().join("herdr.log");
    let env = [
        format!("HOME={}", dir.path().display()),
        format!("PI_CODING_AGENT_DIR={}", agent.display()),
        "PI_OFFLINE=1".to_string(),
        format!("CLANKIE_PI_LOG={}", log.display()),
        // No stack here: the fleet bridge fails to start.
        "CLANKIE_BIN=/bin/false".to_string(),
        "HERDR_ENV=1".to_string(),
        format!("HERDR_SOCKET_PATH={}", herdr.socket.display()),
        "HERDR_PANE_ID=w1:p1".to_string(),
    ];
    let line = format!(
        "exec env {} {} {} --extension {} --model scripted/scripted",
        env.join(" "),
        node().display(),
        pi_cli(NEWEST).display(),
        repo_root()
            .join("integrations/pi-worker/worker.mjs")
            .display()
    );
    tmux.run(&["new-window", "-d", &line]);
    let session: Value = eventually(Duration::from_secs(60), async || {
        file_lines(&log)
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["event"] == "session.started")
    })
    .await
    .expect("Pi started under Herdr");
    let pane = || {
        herdr_call(
            &herdr.socket,
            json!({"id": "get", "method": "pane.get", "params": {"pane_id": "w1:p1"}}),
        )["result"]["pane"]
            .clone()
    };
    let reports = |h: &clankie_tests::HerdrFixture| {
        h.acts_json()
            .into_iter()
            .filter(|a| a["method"] == "pane.report_agent_session")
            .count()
    };
    assert_eq!(reports(&herdr), 0, "the extension reports nothing");
    assert_eq!(pane()["agent"], "pi");
    assert_eq!(pane()["agent_session"], Value::Null);
    let report = |source: &str, seq: u64| {
        herdr_call(
            &herdr.socket,
            json!({"id": "r", "method": "pane.report_agent_session", "params": {
                "pane_id": "w1:p1", "source": source, "agent": "pi", "seq": seq,
                "agent_session_id": session["sessionId"],
                "agent_session_path": session["sessionFile"]}}),
        )
    };
    // Another source is answered ok and dropped.
    assert_eq!(report("clankie", 1)["result"]["type"], "ok");
    assert_eq!(pane()["agent_session"], Value::Null);
    // Herdr's own integration's report is kept.
    assert_eq!(report("herdr:pi", 1)["result"]["type"], "ok");
    let kept = pane()["agent_session"].clone();
    assert_eq!(kept["source"], "herdr:pi", "{kept}");
    assert_eq!(kept["kind"], "path");
    assert_eq!(kept["value"], session["sessionFile"], "{kept}");
    assert_eq!(herdr.stop(), Vec::<String>::new(), "no schema violations");
}

/// The seat's control channel answers only Pi itself. A process the model
/// starts in the same pane passes the pane proof (it runs under the pane's
/// agent), reads every environment and command line it can see, and tries
/// every control route with whatever it found, directly and as an orphan
/// the nearest reaper adopted (inside the sandbox: the sandbox's init, right
/// where Pi itself sits). There is no secret to find, every route refuses
/// it, and the lead's next message still reaches Pi.
async fn a_process_pi_starts_cannot_take_the_seats_deliveries(sandboxed: bool) {
    let f = PiStack::start().await;
    if sandboxed {
        f.stack
            .clankie_ok(&["fleet", "set", "--worker-sandbox", "on"]);
    }
    let worker = f.hire(NEWEST).await;
    assert_eq!(worker.hire["sandboxed"], sandboxed);
    let thief = format!(
        "{} {}",
        python().display(),
        repo_root().join("tests/clients/seat_thief.py").display()
    );
    f.brief(
        &worker,
        &[
            &format!(
                r#"CALL bash {{"command": "{}"}}"#,
                thief.replace('\\', "\\\\").replace('"', "\\\"")
            ),
            r#"CALL message_clankie {"text": "thief: {{last}}"}"#,
            "SAY done",
        ],
    );
    let report = f
        .lead_hears("thief:", Duration::from_secs(90))
        .await
        .unwrap_or_else(|| panic!("{:?}\n{:?}", file_lines(&worker.log), f.model.requests()));
    let text = report["text"].as_str().unwrap_or("");
    let seen: Value = text
        .find('{')
        .and_then(|i| serde_json::from_str(text[i..].trim()).ok())
        .unwrap_or_else(|| panic!("no JSON in the report: {text}"));
    assert!(seen["scanned"].as_u64().unwrap_or(0) > 0, "{seen}");
    assert_eq!(
        seen["secrets"],
        json!([]),
        "no secret in any environment or argv: {seen}"
    );
    let refused = |tries: &Value, codes: &[&str]| {
        for (route, tries) in tries.as_object().expect("routes") {
            for t in tries.as_array().expect("tries") {
                assert_eq!(t["status"], 403, "{route}: {seen}");
                let code = t["code"].as_str().unwrap_or("");
                assert!(codes.contains(&code), "{route}: {seen}");
            }
        }
    };
    refused(&seen["routes"], &["harness_process_required"]);
    // Adopted by the sandbox's init, the orphan sits where Pi sits, one
    // step under the agent, and is still not Pi. Outside the sandbox a
    // reaper outside the pane adopts it.
    // A proof taken while the orphan's adoption settles can find no seat
    // at all (native_seat_required): refused all the same.
    let orphan_codes: &[&str] = if sandboxed {
        &["harness_process_required", "native_seat_required"]
    } else {
        &[
            "harness_process_required",
            "local_process_membership_required",
            "native_seat_required",
        ]
    };
    refused(&seen["orphan"], orphan_codes);
    // Pi's own connection kept working: it took the brief, then takes the
    // next message, and acknowledged exactly those two.
    f.brief(
        &worker,
        &[
            r#"CALL message_clankie {"text": "second brief taken"}"#,
            "SAY ok",
        ],
    );
    assert!(
        f.lead_hears("second brief taken", Duration::from_secs(90))
            .await
            .is_some()
    );
    let acked = eventually(Duration::from_secs(30), async || {
        let n = worker.events("delivery.acknowledged").len();
        (n >= 2).then_some(n)
    })
    .await;
    assert_eq!(acked, Some(2), "{:?}", file_lines(&worker.log));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_pi_starts_in_its_pane_cannot_take_the_seats_deliveries() {
    a_process_pi_starts_cannot_take_the_seats_deliveries(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_a_sandboxed_pi_starts_cannot_take_the_seats_deliveries_even_as_an_orphan() {
    a_process_pi_starts_cannot_take_the_seats_deliveries(true).await;
}

/// Only the session Pi starts in its TUI gets fleet tools: Pi in RPC mode
/// loads the extension, which starts no bridge and registers nothing.
#[tokio::test(flavor = "multi_thread")]
async fn pi_in_rpc_mode_gets_no_fleet_tools() {
    let dir = tempfile::tempdir().expect("dir");
    let agent = dir.path().join("agent");
    std::fs::create_dir_all(&agent).expect("agent");
    let log = dir.path().join("rpc.log");
    let cli = pi_cli(OLDEST);
    let mut pi = std::process::Command::new(node())
        .arg(cli)
        .args(["--mode", "rpc", "--no-session", "--extension"])
        .arg(repo_root().join("integrations/pi-worker/worker.mjs"))
        .env("HOME", dir.path())
        .env("PI_CODING_AGENT_DIR", &agent)
        .env("PI_OFFLINE", "1")
        .env("CLANKIE_PI_LOG", &log)
        .env("CLANKIE_BIN", clankie_tests::bin_dir().join("clankie"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("pi --mode rpc");
    let skipped = eventually(Duration::from_secs(60), async || {
        file_lines(&log)
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["event"] == "fleet.skipped")
    })
    .await;
    let children = Stack::children_matching(pi.id() as i32, "--fleet");
    let _ = pi.kill();
    let _ = pi.wait();
    let skipped = skipped.unwrap_or_else(|| panic!("{:?}", file_lines(&log)));
    assert!(
        skipped["why"].as_str().unwrap_or("").contains("rpc"),
        "{skipped}"
    );
    assert!(children.is_empty(), "no bridge in RPC mode: {children:?}");
    assert!(!file_lines(&log).iter().any(|l| l.contains("tools.listed")));
}

/// A lead's message to a Pi that is working steers the run: it reaches the
/// model right after the running tool's result, before the run goes on.
#[tokio::test(flavor = "multi_thread")]
async fn a_leads_message_to_a_busy_pi_steers_its_run() {
    let f = PiStack::start().await;
    let log = f.dir.path().join("edge.log");
    f.stack.connect_edge("edge", &log, &[]);
    let worker = f.hire(NEWEST).await;
    f.brief(
        &worker,
        &[
            r#"CALL clankie_call {"name": "edge_slow", "arguments": {"seconds": 5, "tag": "busy"}}"#,
            r#"CALL clankie_call {"name": "edge_slow", "arguments": {"seconds": 0.1, "tag": "second"}}"#,
            "SAY finished",
        ],
    );
    assert!(
        clankie_tests::wait_file_line(&log, "busy", Duration::from_secs(60)).await,
        "{:?}",
        file_lines(&worker.log)
    );
    // While the slow call runs, the lead changes course.
    let steer = f.brief(&worker, &["SAY changed course"]);
    let (model, w) = (&f.model, &worker);
    let steered = eventually(Duration::from_secs(60), async || {
        w.events("delivery.handed")
            .into_iter()
            .find(|e| e["deliveryId"] == steer.as_str())
            .and_then(|handed| {
                // The next model request after the slow call's result.
                let after: Vec<Value> = model
                    .requests()
                    .into_iter()
                    .filter(|r| {
                        r["last"]
                            .as_str()
                            .is_some_and(|l| l.contains("changed course"))
                    })
                    .collect();
                after.first().cloned().map(|r| (handed, r))
            })
    })
    .await
    .unwrap_or_else(|| panic!("{:?}\n{:?}", file_lines(&worker.log), f.model.requests()));
    assert_eq!(steered.0["as"], "steer", "{}", steered.0);
    let roles = steered.1["roles"].as_array().cloned().unwrap_or_default();
    let n = roles.len();
    assert!(n >= 2, "{roles:?}");
    assert_eq!(
        roles[n - 2],
        "tool",
        "right after the slow call's result: {roles:?}"
    );
    assert_eq!(roles[n - 1], "user", "{roles:?}");
    // The steered model answered the lead; the brief's second call never ran.
    let ran = file_lines(&log);
    assert!(!ran.iter().any(|l| l.contains("second")), "{ran:?}");
}
