//! Real MCP clients: the MCP Inspector CLI against the gateway, and the
//! Python MCP SDK against `clankie mcp --fleet` over stdio.

use std::process::Command;
use std::time::Duration;

use clankie_tests::{Stack, bin_dir, edge_server, peer_path, python, repo_root};
use serde_json::Value;

fn inspector(stack: &Stack, token: &str, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new("mcp-inspector")
        .arg("--cli")
        .arg(&stack.mcp_url)
        .args(["--transport", "http", "--header"])
        .arg(format!("Authorization: Bearer {token}"))
        .args(args)
        .env("PATH", peer_path())
        .output()
        .expect("run mcp-inspector");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn inspector_cli_searches_describes_and_calls_through_the_gateway() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");

    let (code, list, err) = inspector(&stack, &token, &["--method", "tools/list"]);
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> = list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["clankie_tools", "clankie_call"]);

    let (code, found, err) = inspector(
        &stack,
        &token,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "clankie_tools",
            "--tool-arg",
            "query=convert time",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        found["structuredContent"]["tools"][0]["name"],
        "time_convert_time"
    );

    let (code, called, err) = inspector(
        &stack,
        &token,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "clankie_call",
            "--tool-arg",
            "name=time_get_current_time",
            r#"arguments={"timezone":"Europe/Paris"}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    // The upstream's own result, passed through; the receipt in `_meta`.
    assert_eq!(called["_meta"]["clankie/outcome"], "ok", "{called}");
    assert!(called["_meta"]["clankie/receiptId"].is_string(), "{called}");
    assert_eq!(
        called["structuredContent"]["timezone"], "Europe/Paris",
        "{called}"
    );

    // An unknown tool on the gateway itself: the Inspector's tool-not-found exit.
    let (code, _, _) = inspector(
        &stack,
        &token,
        &["--method", "tools/call", "--tool-name", "no_such_tool"],
    );
    assert_eq!(code, 5);

    // No credentials: the Inspector cannot even list.
    let out = Command::new("mcp-inspector")
        .args([
            "--cli",
            &stack.mcp_url,
            "--transport",
            "http",
            "--method",
            "tools/list",
        ])
        .env("PATH", peer_path())
        .output()
        .expect("run mcp-inspector");
    assert!(!out.status.success());
}

/// Runs a Python SDK client from `tests/clients/` against `clankie mcp
/// --fleet` (the bearer route) and returns the JSON its last line prints.
fn python_through_the_bridge(stack: &Stack, token: &str, script: &str, args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(repo_root().join("tests/clients").join(script))
        .arg(bin_dir().join("clankie"))
        .args(args)
        .env("PATH", peer_path())
        .env("CLANKIE_FLEET_URL", &stack.mcp_url)
        .env("CLANKIE_FLEET_TOKEN", token)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run the python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("json")
}

#[tokio::test(flavor = "multi_thread")]
async fn python_sdk_through_the_stdio_fleet_bridge() {
    let stack = Stack::start().await.expect("stack");
    let edge = edge_server();
    let py = python();
    stack.connect_stdio(
        "edge",
        &[py.to_str().expect("utf8"), edge.to_str().expect("utf8")],
        &[],
    );
    let token = stack.token("alpha");
    let seen = python_through_the_bridge(&stack, &token, "fleet_session.py", &[]);
    assert_eq!(seen["server"], "clankie-fleet");
    assert_eq!(
        seen["tools"],
        serde_json::json!(["clankie_call", "clankie_tools"])
    );
    assert_eq!(seen["search"][0], "edge_slow");
    assert_eq!(seen["call"]["outcome"], "ok");
    assert!(
        seen["call"]["receiptId"]
            .as_str()
            .unwrap_or("")
            .starts_with("rcpt_"),
        "the bridge chose the receipt id: {seen}"
    );
    assert_eq!(seen["reconcile"]["fromReceipt"], true);
    assert_eq!(seen["add_tool"], "ok");
    assert!(seen["list_changed"].as_u64().unwrap_or(0) >= 1, "{seen}");
    assert!(
        seen["after"]
            .as_array()
            .expect("after")
            .iter()
            .any(|n| n == "edge_fresh")
    );
    assert_eq!(seen["unknown"]["isError"], true);
    assert_eq!(seen["unknown"]["code"], "unknown_tool");
}

/// `clankie_call` of mcp-server-time's clock through `bridge`: the
/// structured answer.
async fn time_call(bridge: &rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Value {
    let r = clankie_tests::call(
        bridge,
        "clankie_call",
        serde_json::json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    )
    .await
    .expect("call");
    clankie_tests::structured(&r)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stdio_bridge_keeps_its_catalog_while_the_gateway_restarts() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    let bridge = stack.fleet_bridge(&token).await.expect("bridge");
    assert_eq!(bridge.list_all_tools().await.expect("list").len(), 2);

    let gateway = stack.service_pid("gateway").expect("gateway pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gateway),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill gateway");
    // While the gateway is down the verified catalog stays published.
    assert_eq!(bridge.list_all_tools().await.expect("cached list").len(), 2);
    // A call on the connection that died under it may have been received:
    // it may be uncertain. Once that connection is dropped, a call while the
    // gateway is down cannot be sent: a refusal, never "may have applied"
    // (unless the gateway is already back and answers it).
    let call = async || time_call(&bridge).await;
    let _stale = call().await;
    let body = call().await;
    assert!(
        body["outcome"] == "ok" || body["error"]["code"].is_string(),
        "{body}"
    );
    assert!(
        stack
            .wait_line("gateway restarted", std::time::Duration::from_secs(30))
            .await
    );

    // Calls work again through the restarted gateway, at the same address.
    let mut ok = false;
    for _ in 0..50 {
        let body = time_call(&bridge).await;
        if body["outcome"] == "ok" {
            assert!(
                body["receiptId"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("rcpt_")
            );
            ok = true;
            break;
        }
        // Before the gateway is back: refused before forwarding, never
        // uncertain for a call that could not be sent.
        assert!(body["error"]["code"].is_string(), "{body}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(ok, "the bridge reconnects to the restarted gateway");
}

/// A refusal that forwarded nothing is retried once, after the wait the
/// gateway names, inside the request's one 30 s budget. Admission is
/// stopped (SIGSTOP) while the bridge calls: the gateway's door gives up on
/// it after its 5 s internal budget and answers 503
/// `fleet_admission_unavailable` with `retryAfterMs`; admission resumes as
/// soon as that refusal is logged, and the bridge's retry a second later is
/// admitted and answered. Without the retry the caller gets the refusal.
/// (The bridge's own catalog poll may be refused too while admission is
/// stopped, so the refusals are not counted.)
#[tokio::test(flavor = "multi_thread")]
async fn a_call_refused_before_forwarding_is_retried_once_after_the_named_wait() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    let bridge = stack.fleet_bridge(&token).await.expect("bridge");
    assert_eq!(bridge.list_all_tools().await.expect("list").len(), 2);
    let gateway_log = stack.state.path().join("logs/gateway.log");
    let refusals = || {
        std::fs::read_to_string(&gateway_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("fleet_admission_unavailable"))
            .count()
    };
    let before = refusals();
    let admission = stack.service_pid("admission").expect("admission pid");
    clankie_tests::pause(admission);
    let call = tokio::spawn(async move { time_call(&bridge).await });
    let refused = clankie_tests::eventually(Duration::from_secs(20), async || {
        (refusals() > before).then_some(())
    })
    .await;
    clankie_tests::resume(admission);
    assert!(
        refused.is_some(),
        "the door refused while admission was stopped:\n{}",
        stack.log_tails(&["gateway", "admission"], 40)
    );
    let body = tokio::time::timeout(Duration::from_secs(40), call)
        .await
        .expect("within the budget")
        .expect("join");
    assert_eq!(body["outcome"], "ok", "retried and answered: {body}");
}

/// While a connected call runs, the client hears what the upstream says:
/// server-everything's progress steps come back under the client's own
/// token (through the gateway and the stdio bridge), and once the client
/// set a level, the account's log lines reach it at that level or above.
#[tokio::test(flavor = "multi_thread")]
async fn progress_and_log_lines_reach_the_client_at_the_level_it_set() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let token = stack.token("hearing");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "everything_toggle-simulated-logging").await;
    let seen = python_through_the_bridge(&stack, &token, "hear_session.py", &["warning"]);
    assert_eq!(seen["call"]["outcome"], "ok", "{seen}");
    assert_eq!(
        seen["progress"],
        serde_json::json!([[1.0, 4.0], [2.0, 4.0], [3.0, 4.0], [4.0, 4.0]]),
        "every step, in order, under the client's token: {seen}"
    );
    assert_eq!(seen["toggle"]["outcome"], "ok", "{seen}");
    let lines = seen["lines"].as_array().expect("lines");
    assert!(!lines.is_empty(), "a line at warning or above: {seen}");
    for level in lines {
        let level = level.as_str().unwrap_or("");
        assert!(
            clankie_types::log_level::reaches(level, "warning"),
            "{level} is below the level the client set: {seen}"
        );
    }
}

/// A harness of any era gets the same tools and answers through the
/// bridge: the SDK's handshake (2025-11-25), a handshake whose calls also
/// carry the 2026-07-28 stamp in `_meta` (as Claude Code 2.x stamps its
/// requests), and the stateless 2026-07-28 era (`server/discover`). None
/// of the harness's protocol keys crosses into the bridge's own session. The model sees the receipt: a connected call's
/// upstream blocks come back as they were, followed by one text block
/// naming its receipt and outcome.
#[tokio::test(flavor = "multi_thread")]
async fn every_protocol_era_a_harness_speaks_gets_the_same_tools_and_sees_its_receipt() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let token = stack.token("alpha");
    for mode in ["handshake", "stamped", "modern"] {
        let seen = python_through_the_bridge(&stack, &token, "versions_session.py", &[mode]);
        assert_eq!(
            seen["tools"],
            serde_json::json!(["clankie_call", "clankie_tools"]),
            "{mode}: {seen}"
        );
        assert_eq!(seen["search"]["isError"], false, "{mode}: {seen}");
        let call = &seen["call"];
        assert_eq!(call["isError"], false, "{mode}: {seen}");
        assert_eq!(call["result"]["outcome"], "ok", "{mode}: {seen}");
        let receipt = call["result"]["receiptId"].as_str().unwrap_or("");
        assert!(receipt.starts_with("rcpt_"), "{mode}: {seen}");
        let blocks = seen["content"].as_array().expect("content");
        assert!(blocks.len() >= 2, "{mode}: {seen}");
        assert_eq!(
            blocks[0]["text"], "Echo: versions",
            "the upstream's block first, as sent: {seen}"
        );
        let last = blocks.last().and_then(|b| b["text"].as_str()).unwrap_or("");
        assert!(
            last.contains(receipt) && last.contains("\"outcome\":\"ok\""),
            "{mode}: the receipt is where the model reads: {seen}"
        );
    }
}

/// A verified catalog outlives a later refusal. The bridge's pane loses its
/// link (the owner revokes it): the bridge's automatic relist is refused as
/// a non-member and goes quiet, and when the harness then asks for the
/// tools itself it still gets the verified list, not an error.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_bridge_keeps_answering_with_its_verified_catalog() {
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let _workspace = stack.add_project("alpha", &[]);
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("watch.jsonl");
    let again = dir.path().join("again");
    let script = repo_root().join("tests/clients/bridge_watch.py");
    let args: Vec<String> = vec![
        python().display().to_string(),
        script.display().to_string(),
        bin_dir().join("clankie").display().to_string(),
        out.display().to_string(),
        again.display().to_string(),
    ];
    let mut hire = vec!["hire", "--project", "alpha", "--"];
    hire.extend(args.iter().map(String::as_str));
    stack.clankie_ok(&hire);
    let listing = |event: &str| -> Option<Value> {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["event"] == event)
    };
    let first = clankie_tests::eventually(Duration::from_secs(60), async || listing("listed"))
        .await
        .unwrap_or_else(|| panic!("{}", stack.log_tails(&["gateway"], 20)));
    assert!(
        first["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|n| n == "clankie_call")),
        "{first}"
    );
    let status: Value =
        serde_json::from_str(&stack.clankie_ok(&["fleet", "status", "--json"])).expect("status");
    let link = status["links"][0]["linkId"]
        .as_str()
        .expect("link")
        .to_string();
    stack.clankie_ok(&["fleet", "token", "revoke", &link]);
    let err = out.with_extension("jsonl.err");
    let quiet = clankie_tests::eventually(Duration::from_secs(60), async || {
        std::fs::read_to_string(&err)
            .ok()
            .filter(|t| t.contains("automatic catalog refresh is quiet"))
    })
    .await;
    assert!(quiet.is_some(), "the bridge was refused as a non-member");
    std::fs::write(&again, b"").expect("ask again");
    let asked = clankie_tests::eventually(Duration::from_secs(30), async || listing("again"))
        .await
        .expect("the harness's own listing");
    assert_eq!(asked["tools"], first["tools"], "the verified list: {asked}");
}

/// What `tests/clients/bridge_watch.py` wrote to `out` so far: one
/// listing per line.
fn watched(out: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Whether a watched listing holds `clankie_call`.
fn has_call(v: &Value) -> bool {
    v["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|n| n == "clankie_call"))
}

/// A bridge without the seat channel (a harness that reads its deliveries
/// itself) watches the catalog alone. The gateway restarts under it, which
/// ends the bridge's MCP stream, and then the owner turns fleet tools off:
/// the bridge still notices (its long poll fails, so it lists every 5 s
/// until the poll is back) and its harness, the Python SDK here, hears
/// `tools/list_changed` and lists the tools gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_channel_less_bridge_hears_a_catalog_change_after_the_gateway_restarts() {
    use std::time::Duration;
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let _workspace = stack.add_project("alpha", &[]);
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("watch.jsonl");
    let clankie = bin_dir().join("clankie");
    let script = repo_root().join("tests/clients/bridge_watch.py");
    let args: Vec<String> = [
        python().display().to_string(),
        script.display().to_string(),
        clankie.display().to_string(),
        out.display().to_string(),
    ]
    .to_vec();
    let mut hire = vec!["hire", "--project", "alpha", "--"];
    hire.extend(args.iter().map(String::as_str));
    stack.clankie_ok(&hire);
    let listings = || watched(&out);
    let first = clankie_tests::eventually(Duration::from_secs(60), async || {
        listings().into_iter().find(|l| l["event"] == "listed")
    })
    .await
    .unwrap_or_else(|| panic!("{}", stack.log_tails(&["gateway"], 20)));
    assert!(has_call(&first), "{first}");

    let gateway = stack.service_pid("gateway").expect("gateway pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gateway),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill gateway");
    assert!(
        stack
            .wait_line("gateway restarted", Duration::from_secs(30))
            .await
    );
    stack.clankie_ok(&["fleet", "set", "--tools", "off"]);
    let changed = clankie_tests::eventually(Duration::from_secs(60), async || {
        listings()
            .into_iter()
            .find(|l| l["event"] == "changed" && !has_call(l))
    })
    .await;
    assert!(changed.is_some(), "{:?}", listings());
}

/// A seat's parked poll that ends on a catalog change carries the new
/// listing, and the bridge takes it instead of listing again: the real
/// bridge says which it did, and its harness (the Python SDK) hears
/// `tools/list_changed` and lists the tools gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_parked_seat_poll_carries_the_changed_listing_to_its_harness() {
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let _workspace = stack.add_project("alpha", &[]);
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("watch.jsonl");
    let err = out.with_extension("jsonl.err");
    let python = python().display().to_string();
    let script = repo_root().join("tests/clients/bridge_watch.py");
    let script = script.display().to_string();
    let clankie = bin_dir().join("clankie").display().to_string();
    let out_arg = out.display().to_string();
    stack.clankie_ok(&[
        "hire",
        "--project",
        "alpha",
        "--",
        "env",
        "BRIDGE_WATCH_CHANNEL=1",
        "RUST_LOG=info,clankie=debug,clankie_cli=debug",
        &python,
        &script,
        &clankie,
        &out_arg,
    ]);
    let listings = || watched(&out);
    let bridge_log = || std::fs::read_to_string(&err).unwrap_or_default();
    // Parked: the first poll (which does not wait) was answered, so the
    // next one waits on a revision.
    let parked = clankie_tests::eventually(Duration::from_secs(60), async || {
        bridge_log()
            .lines()
            .any(|l| l.contains("seat poll") && l.contains("wait=25000"))
            .then_some(())
    })
    .await;
    assert!(parked.is_some(), "{}", bridge_log());
    let first = listings();
    assert!(first.first().is_some_and(has_call), "{first:?}");

    stack.clankie_ok(&["fleet", "set", "--tools", "off"]);
    let changed = clankie_tests::eventually(Duration::from_secs(60), async || {
        listings()
            .into_iter()
            .find(|l| l["event"] == "changed" && !has_call(l))
    })
    .await;
    assert!(changed.is_some(), "{:?}\n{}", listings(), bridge_log());
    let changed = changed.unwrap_or_default();
    let tools = changed["tools"].as_array().cloned().unwrap_or_default();
    assert!(
        tools.iter().any(|t| t == "message_clankie"),
        "the seat keeps its own tools: {changed}"
    );
    assert!(
        bridge_log()
            .lines()
            .any(|l| l.contains("took the listing a seat poll carried")
                && l.contains("changed=true")),
        "{}",
        bridge_log()
    );
}

/// `tests/peers/stalling_gateway.py` on `dir/gateway.sock`, logging to
/// `dir/LOG`; `stall`: whether it holds every tool listing open. Returns
/// once it listens.
async fn gateway_stand_in(
    dir: &std::path::Path,
    log: &str,
    stall: bool,
) -> (std::process::Child, std::path::PathBuf, std::path::PathBuf) {
    let socket = dir.join("gateway.sock");
    let log = dir.join(log);
    let child = Command::new(python())
        .arg(repo_root().join("tests/peers/stalling_gateway.py"))
        .arg(&socket)
        .arg(&log)
        .env("STALL_LISTS", if stall { "1" } else { "0" })
        .spawn()
        .expect("gateway stand-in");
    clankie_tests::eventually(Duration::from_secs(20), async || {
        socket.exists().then_some(())
    })
    .await
    .expect("the stand-in listens");
    (child, socket, log)
}

/// Initial discovery abandons a listing that stalls and tries again within
/// its 20 s window, then fails with the real reason: a gateway that accepts
/// and never answers `tools/list` is asked more than once, and the bridge
/// says it stalled (one stalled request is never allowed to spend the whole
/// request budget past the window).
#[tokio::test(flavor = "multi_thread")]
async fn initial_discovery_abandons_a_stalled_listing_and_retries_within_its_window() {
    let dir = tempfile::tempdir().expect("dir");
    let (mut gateway, socket, attempts) = gateway_stand_in(dir.path(), "attempts.log", true).await;
    let log = dir.path().join("bridge.log");
    let mut bridge = Command::new(bin_dir().join("clankie"))
        .args(["mcp", "--fleet"])
        .env("CLANKIE_MCP_SOCKET", &socket)
        .env("CLANKIE_STATE", dir.path().join("state"))
        .env_remove("TMUX_PANE")
        .env_remove("HERDR_PANE_ID")
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("bridge");
    let failed = clankie_tests::eventually(Duration::from_secs(90), async || {
        let text = std::fs::read_to_string(&log).ok()?;
        text.lines()
            .find(|l| l.contains("initial fleet discovery failed"))
            .map(str::to_string)
    })
    .await;
    for child in [&mut bridge, &mut gateway] {
        let _ = child.kill();
        let _ = child.wait();
    }
    let failed = failed.unwrap_or_else(|| {
        panic!(
            "discovery never ended: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    assert!(failed.contains("stalled"), "{failed}");
    let asked = std::fs::read_to_string(&attempts)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == "list")
        .count();
    assert!(
        asked >= 2,
        "a stalled listing was never tried again ({asked})"
    );
}

/// A Herdr worker whose pane Herdr answers `pane_not_found` for (a spare
/// that inherited an obsolete pane id) stays unclaimed: its bridge opens no
/// seat channel. One whose Herdr cannot be reached is unknown, not absent:
/// its channel runs and the service's proof decides.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_herdr_says_has_no_pane_stays_unclaimed_and_an_unreachable_herdr_is_unknown() {
    let dir = tempfile::tempdir().expect("dir");
    let (mut gateway, socket, requests) = gateway_stand_in(dir.path(), "requests.log", false).await;
    let herdr = clankie_tests::HerdrFixture::start("{}", None).await;
    let spare_log = dir.path().join("spare.log");
    let bridge = |pane: &str, herdr_socket: &std::path::Path, log: std::process::Stdio| {
        Command::new(bin_dir().join("clankie"))
            .args(["mcp", "--fleet"])
            .env("CLANKIE_MCP_SOCKET", &socket)
            .env("CLANKIE_STATE", dir.path().join("state"))
            .env_remove("TMUX_PANE")
            .env("HERDR_PANE_ID", pane)
            .env("HERDR_SOCKET_PATH", herdr_socket)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("bridge")
    };
    let log = std::fs::File::create(&spare_log).expect("log");
    let mut spare = bridge("ghost-91", &herdr.socket, log.into());
    let no_herdr = dir.path().join("no-herdr.sock");
    let mut unknown = bridge("ghost-92", &no_herdr, std::process::Stdio::null());
    let polled = clankie_tests::eventually(Duration::from_secs(60), async || {
        let text = std::fs::read_to_string(&requests).ok()?;
        text.contains("/v1/fleet/seats/ghost-92/").then_some(text)
    })
    .await;
    // The spare decided (it says so once, after discovery, where a claimed
    // seat's channel would start).
    let decided = clankie_tests::eventually(Duration::from_secs(60), async || {
        let text = std::fs::read_to_string(&spare_log).ok()?;
        text.contains("stays unclaimed").then_some(())
    })
    .await;
    let seen = std::fs::read_to_string(&requests).unwrap_or_default();
    for child in [&mut spare, &mut unknown, &mut gateway] {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        polled.is_some(),
        "an unreachable Herdr kept the channel shut: {seen}"
    );
    assert!(
        decided.is_some(),
        "the spare never decided: {}",
        std::fs::read_to_string(&spare_log).unwrap_or_default()
    );
    assert!(
        !seen.contains("ghost-91"),
        "a pane Herdr says is gone was claimed: {seen}"
    );
}
