//! The connected-tools path end to end: real `clankie up`, real upstream MCP
//! servers (mcp-server-time, server-everything over stdio and streamable
//! HTTP, our edge server) and real MCP clients.

use std::time::Duration;

use clankie_tests::{
    Stack, call, edge_server, file_lines, free_port, peer_path, python, structured,
};
use serde_json::json;

/// Starts server-everything over streamable HTTP; killed on drop.
struct EverythingHttp {
    child: std::process::Child,
    url: String,
}

impl EverythingHttp {
    fn start() -> Self {
        let port = free_port();
        let child = std::process::Command::new("mcp-server-everything")
            .arg("streamableHttp")
            .env("PATH", peer_path())
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start server-everything");
        let url = format!("http://127.0.0.1:{port}/mcp");
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        EverythingHttp { child, url }
    }
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn error_code(r: &rmcp::model::CallToolResult) -> String {
    structured(r)["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn search_describe_call_across_stdio_and_http_upstreams() {
    let mut stack = Stack::start().await.expect("stack");
    let everything_http = EverythingHttp::start();
    let out = stack.connect_stdio("time", &["mcp-server-time"], &[]);
    assert!(
        out.contains("verified") && out.contains("mcp-time"),
        "{out}"
    );
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    stack.clankie_ok(&["connect", "evhttp", "--url", &everything_http.url]);
    let accounts: serde_json::Value =
        serde_json::from_str(&stack.clankie_ok(&["accounts", "--json"])).expect("json");
    let list = accounts["accounts"].as_array().expect("accounts");
    assert_eq!(list.len(), 3);
    for a in list {
        assert_eq!(a["state"], "verified", "{a}");
        assert!(
            !a["identity"]["name"].as_str().unwrap_or("").is_empty(),
            "{a}"
        );
    }

    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");
    let tools = client.list_all_tools().await.expect("list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["clankie_tools", "clankie_call"]);
    let description = tools[0].description.as_deref().unwrap_or("");
    assert!(
        description.contains("Connected now: everything, evhttp, linear, time"),
        "{description}"
    );

    // Search: ranked, bounded, qualified names.
    let r = call(&client, "clankie_tools", json!({"query": "current time"}))
        .await
        .expect("search");
    let hits = structured(&r)["tools"].as_array().cloned().expect("tools");
    assert_eq!(hits[0]["name"], "time_get_current_time");
    let r = call(&client, "clankie_tools", json!({}))
        .await
        .expect("page");
    let page = structured(&r)["tools"].as_array().cloned().expect("tools");
    assert!(page.len() <= 20 && !page.is_empty());
    assert!(structured(&r)["totalMatches"].as_u64().unwrap_or(0) > 20);

    // Describe: full schemas, unknown names omitted.
    let r = call(
        &client,
        "clankie_tools",
        json!({"names": ["time_get_current_time", "time_nope"]}),
    )
    .await
    .expect("describe");
    let described = structured(&r)["tools"].as_array().cloned().expect("tools");
    assert_eq!(described.len(), 1);
    assert_eq!(described[0]["inputSchema"]["required"], json!(["timezone"]));
    // At most 10 full schemas: ten distinct names are all described, and
    // asking for more is refused (the schema's bound), never cut silently.
    let names: Vec<serde_json::Value> = page.iter().map(|t| t["name"].clone()).collect();
    assert!(names.len() >= 12, "{page:?}");
    let r = call(&client, "clankie_tools", json!({ "names": names[..10] }))
        .await
        .expect("describe ten");
    let described = structured(&r)["tools"].as_array().map(Vec::len);
    assert_eq!(described, Some(10), "{r:?}");
    let r = call(&client, "clankie_tools", json!({ "names": names[..12] }))
        .await
        .expect("describe twelve");
    assert_eq!(error_code(&r), "invalid_argument", "{r:?}");

    // Calls over stdio and over streamable HTTP.
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    )
    .await
    .expect("time");
    let body = structured(&r);
    assert_eq!(body["outcome"], "ok", "{body}");
    assert_eq!(body["result"]["structuredContent"]["timezone"], "Etc/UTC");
    let receipt = body["receiptId"].as_str().expect("receipt").to_string();

    let r = call(
        &client,
        "clankie_call",
        json!({"name": "everything_echo", "arguments": {"message": "hello fleet"}}),
    )
    .await
    .expect("echo");
    assert!(structured(&r)["result"].to_string().contains("hello fleet"));

    let r = call(
        &client,
        "clankie_call",
        json!({"name": "evhttp_get-sum", "arguments": {"a": 2, "b": 3}}),
    )
    .await
    .expect("sum");
    assert_eq!(structured(&r)["outcome"], "ok");
    assert!(structured(&r)["result"].to_string().contains('5'));

    // An upstream isError result is an error outcome with its receipt.
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "time_get_current_time", "arguments": {"timezone": "Bad/Zone"}}),
    )
    .await
    .expect("bad zone");
    assert_eq!(r.is_error, Some(true));
    assert_eq!(structured(&r)["outcome"], "error");
    assert_eq!(structured(&r)["result"]["isError"], true);

    // Refusals before dispatch carry fixed reason codes.
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "time_nope", "arguments": {}}),
    )
    .await
    .expect("unknown");
    assert_eq!(error_code(&r), "unknown_tool");
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "time_get_current_time", "arguments": {"timezone": 5}}),
    )
    .await
    .expect("schema");
    assert_eq!(error_code(&r), "arguments_invalid");
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "time_get_current_time"}),
    )
    .await
    .expect("missing");
    assert_eq!(error_code(&r), "arguments_invalid");
    let r = call(&client, "clankie_call", json!({"bogus": 1}))
        .await
        .expect("bogus");
    assert_eq!(error_code(&r), "arguments_invalid");

    // Reconcile by receipt: the original, never a new dispatch.
    let r = call(&client, "clankie_call", json!({"receiptId": receipt}))
        .await
        .expect("receipt");
    assert_eq!(structured(&r)["fromReceipt"], true);
    assert_eq!(structured(&r)["outcome"], "ok");

    // Every provider call is audited with its principal.
    let audit = file_lines(&stack.state.path().join("audit/connected-calls.jsonl"));
    assert!(
        audit
            .iter()
            .any(|l| l.contains("fleet:alpha:pane:unverified")
                && l.contains("\"dispatch\"")
                && l.contains(&receipt))
    );

    // A bad token never reaches the MCP service.
    assert!(stack.client("clkf_nope").await.is_err());

    client.cancel().await.expect("cancel");
    assert!(stack.stop(), "clankie up exits cleanly on SIGTERM");
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_off_lists_nothing_and_refuses_stale_catalogs() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");
    assert_eq!(client.list_all_tools().await.expect("list").len(), 2);

    let out = stack.clankie_ok(&["fleet", "set", "--tools", "off"]);
    assert!(out.contains("fleet.tools: off"), "{out}");
    assert!(client.list_all_tools().await.expect("list").is_empty());
    // The catalog the client already holds is stale: calls are refused.
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    )
    .await
    .expect("call");
    assert_eq!(error_code(&r), "fleet_tools_off");
    let r = call(&client, "clankie_tools", json!({"query": "time"}))
        .await
        .expect("search");
    assert_eq!(error_code(&r), "fleet_tools_off");
    assert!(
        file_lines(&stack.state.path().join("audit/connected-calls.jsonl")).is_empty(),
        "nothing was dispatched"
    );

    stack.clankie_ok(&["fleet", "set", "--tools", "connected"]);
    assert_eq!(
        clankie_tests::utc_now(&client).await.expect("call")["outcome"],
        "ok"
    );

    // Revoking the link ends its admission at once.
    let status: serde_json::Value =
        serde_json::from_str(&stack.clankie_ok(&["fleet", "status", "--json"])).expect("json");
    let link = status["links"][0]["linkId"]
        .as_str()
        .expect("link")
        .to_string();
    stack.clankie_ok(&["fleet", "token", "revoke", &link]);
    assert!(client.list_all_tools().await.is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn one_upstream_killed_leaves_the_others_working_and_restarts() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let edge = edge_server();
    let py = python();
    stack.connect_stdio(
        "edge",
        &[py.to_str().expect("utf8"), edge.to_str().expect("utf8")],
        &[],
    );
    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");

    let host = stack.service_pid("mcp-host").expect("mcp-host pid");
    let time = Stack::children_matching(host, "mcp-server-time");
    assert_eq!(time.len(), 1, "one time server process, not one per call");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(time[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill time server");

    // The other account keeps working while time is down.
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "edge_slow", "arguments": {"seconds": 0, "tag": "x"}}),
    )
    .await
    .expect("edge");
    assert_eq!(structured(&r)["outcome"], "ok");

    // The dead server is restarted with backoff and verifies again.
    let back = clankie_tests::eventually(Duration::from_secs(20), async || {
        let accounts: serde_json::Value =
            serde_json::from_str(&stack.clankie_ok(&["accounts", "--json"])).expect("json");
        let t = accounts["accounts"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["name"] == "time").cloned())
            .expect("time account");
        (t["state"] == "verified" && t["restarts"].as_u64().unwrap_or(0) >= 1).then_some(())
    })
    .await;
    assert!(back.is_some(), "time account verified again after restart");
    assert_eq!(
        clankie_tests::utc_now(&client).await.expect("time again")["outcome"],
        "ok"
    );
    assert_eq!(Stack::children_matching(host, "mcp-server-time").len(), 1);

    // Disconnecting removes the account's tools from the catalog.
    stack.clankie_ok(&["disconnect", "time"]);
    let r = call(&client, "clankie_tools", json!({"query": "time"}))
        .await
        .expect("search");
    assert!(structured(&r)["tools"].as_array().is_some_and(|t| {
        t.iter()
            .all(|t| !t["name"].as_str().unwrap_or("").starts_with("time_"))
    }));
}

/// `clankie_call` passes the upstream's result through as it was sent:
/// an image block byte for byte, resource links, annotated blocks, with
/// the receipt and outcome added to `_meta`; a reconcile returns the same.
#[tokio::test(flavor = "multi_thread")]
async fn clankie_call_returns_the_upstreams_blocks_as_they_were_sent() {
    use rmcp::ServiceExt;
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let token = stack.token("fidelity");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "everything_get-tiny-image").await;
    let mut cmd = tokio::process::Command::new("mcp-server-everything");
    cmd.arg("stdio").env("PATH", peer_path());
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("direct server");
    let direct = ().serve(transport).await.expect("direct session");
    for (tool, args) in [
        ("get-tiny-image", json!({})),
        (
            "get-annotated-message",
            json!({"messageType": "success", "includeImage": true}),
        ),
        ("get-resource-links", json!({"count": 2})),
        ("get-structured-content", json!({"location": "New York"})),
    ] {
        let mut p = rmcp::model::CallToolRequestParams::new(tool);
        p.arguments = args.as_object().cloned();
        let want = direct.call_tool(p).await.expect("direct call");
        let via = call(
            &client,
            "clankie_call",
            json!({"name": format!("everything_{tool}"), "arguments": args}),
        )
        .await
        .expect("clankie_call");
        let (w, v) = (
            serde_json::to_value(&want.content).expect("json"),
            serde_json::to_value(&via.content).expect("json"),
        );
        assert_eq!(v, w, "{tool}: the blocks as the upstream sent them");
        assert_eq!(via.structured_content, want.structured_content, "{tool}");
        assert_eq!(via.is_error, want.is_error, "{tool}");
        let meta = via.meta.clone().expect("meta");
        assert_eq!(meta.get("clankie/outcome"), Some(&json!("ok")), "{tool}");
        let receipt = meta.get("clankie/receiptId").cloned().expect("receipt");
        // Reconciling reads the same full result from the receipt.
        let again = call(&client, "clankie_call", json!({"receiptId": receipt}))
            .await
            .expect("reconcile");
        assert_eq!(
            serde_json::to_value(&again.content).expect("json"),
            w,
            "{tool}"
        );
        assert_eq!(
            again.meta.expect("meta").get("clankie/fromReceipt"),
            Some(&json!(true))
        );
    }
    let image = serde_json::to_value(&direct_image(&direct).await).expect("json");
    assert_eq!(image["type"], "image", "{image}");
}

async fn direct_image(
    direct: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
) -> rmcp::model::ContentBlock {
    let r = direct
        .call_tool(rmcp::model::CallToolRequestParams::new("get-tiny-image"))
        .await
        .expect("image");
    r.content
        .into_iter()
        .find(|c| serde_json::to_value(c).is_ok_and(|v| v["type"] == "image"))
        .expect("an image block")
}

/// `clankie accounts --json` as JSON.
fn accounts(stack: &Stack) -> serde_json::Value {
    serde_json::from_str(&stack.clankie_ok(&["accounts", "--json"])).expect("json")
}

fn account<'a>(all: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    all["accounts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == name))
        .unwrap_or_else(|| panic!("no account {name}: {all}"))
}

/// A broken upstream is never invisible. Programs connected by bare name
/// are found on the caller's PATH and keep it, so a restart under a service
/// manager's minimal PATH brings them back. A server that cannot start
/// says why in its own words: its stderr goes to its own 0600 log and its
/// last lines into the account's error (never into the services' logs),
/// and `status`, `doctor` and `/readyz` name it as degraded.
#[tokio::test(flavor = "multi_thread")]
async fn a_broken_upstream_is_named_with_its_own_words_and_a_minimal_path_finds_the_rest() {
    let mut stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let all = accounts(&stack);
    let target = account(&all, "time")["target"].as_str().expect("target");
    assert!(
        target.starts_with('/') && target.ends_with("/mcp-server-time"),
        "resolved on the caller's side: {target}"
    );

    // What does not exist exits 4 (docs/CLI.md), a refusal 1.
    for (args, code) in [
        (&["disconnect", "nope"][..], 4),
        (&["close", "hire-nope"], 4),
        (&["access", "fleet"], 1),
    ] {
        let out = stack.clankie(args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
    }

    // A program that is nowhere: refused before anything is saved, naming
    // the PATH it searched.
    let missing = stack.clankie(&["connect", "nope", "--", "no-such-mcp-server"]);
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(said.contains("not found on PATH ("), "{said}");
    assert!(!said.contains("Os {"), "no Rust type names: {said}");
    assert!(
        accounts(&stack)["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .all(|a| a["name"] != "nope")
    );

    // A server that prints why it cannot run, and exits.
    let dir = tempfile::tempdir().expect("dir");
    let server = dir.path().join("gh-server");
    std::fs::write(
        &server,
        "#!/bin/sh\necho 'starting gh server' >&2\necho 'GITHUB_TOKEN is not set' >&2\nexit 1\n",
    )
    .expect("script");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let gh = stack.clankie(&[
        "connect",
        "gh",
        "--wait",
        "5",
        "--",
        server.to_str().expect("utf8"),
    ]);
    assert!(!gh.status.success(), "not verified");
    let error = clankie_tests::eventually(Duration::from_secs(30), async || {
        let all = accounts(&stack);
        let gh = account(&all, "gh");
        let e = gh["lastError"].as_str().unwrap_or("").to_string();
        (gh["state"] != "verified" && e.contains("GITHUB_TOKEN is not set")).then_some(e)
    })
    .await
    .expect("the server's own words in the account's error");
    assert!(
        error.contains("starting gh server | GITHUB_TOKEN is not set"),
        "{error}"
    );
    let log = stack.paths().account_log("gh");
    let logged = std::fs::read_to_string(&log).expect("the account's log");
    assert!(logged.contains("GITHUB_TOKEN is not set"), "{logged}");
    let mode = std::fs::metadata(&log).expect("meta").permissions().mode();
    assert_eq!(mode & 0o077, 0, "private: {mode:o}");
    let service_log =
        std::fs::read_to_string(stack.state.path().join("logs/mcp-host.log")).unwrap_or_default();
    assert!(
        !service_log.contains("GITHUB_TOKEN"),
        "a server's words stay out of the services' logs"
    );

    // A member calling its tools while it is down is told to retry, not
    // that the tool is unknown; a name of no account stays unknown.
    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "gh_whoami", "arguments": {}}),
    )
    .await
    .expect("call");
    assert_eq!(
        structured(&r)["error"]["code"],
        "account_unavailable",
        "{r:?}"
    );
    assert_eq!(structured(&r)["error"]["retryable"], true, "{r:?}");
    let r = call(
        &client,
        "clankie_call",
        json!({"name": "zzz_nothing", "arguments": {}}),
    )
    .await
    .expect("call");
    assert_eq!(error_code(&r), "unknown_tool", "{r:?}");
    drop(client);

    // Named as degraded everywhere an operator looks.
    let status = stack.clankie(&["status", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status json");
    assert_eq!(s["healthy"], false, "{s}");
    assert!(s["degradedAccounts"]["gh"].is_string(), "{s}");
    assert_eq!(status.status.code(), Some(1), "{s}");
    let doctor = stack.clankie(&["doctor", "--json"]);
    let d: serde_json::Value = serde_json::from_slice(&doctor.stdout).expect("doctor json");
    assert_eq!(d["healthy"], false, "{d}");
    let gh = d["accounts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "gh"))
        .unwrap_or_else(|| panic!("doctor names gh: {d}"));
    assert_eq!(gh["state"], s["degradedAccounts"]["gh"], "{d}");
    assert!(
        gh["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("GITHUB_TOKEN"),
        "the owner's doctor shows the server's own words: {d}"
    );
    let (code, body) = clankie_tests::http(&format!("{}/readyz", stack.url), "GET", &[], "");
    let r: serde_json::Value = serde_json::from_str(&body).expect("readyz json");
    assert_eq!(code, 200, "{body}");
    assert_eq!(r["status"], "degraded", "{body}");
    assert!(r["degradedAccounts"]["gh"].is_string(), "{body}");
    assert!(
        !body.contains("GITHUB_TOKEN"),
        "readiness names, never errors: {body}"
    );

    // Under a service manager's PATH, the resolved accounts come back, and
    // `up` names the one that does not.
    stack
        .restart(clankie_tests::StackOptions {
            path: Some("/usr/sbin:/usr/bin:/sbin:/bin".into()),
            ..Default::default()
        })
        .await
        .expect("restart");
    let back = clankie_tests::eventually(Duration::from_secs(60), async || {
        let all = accounts(&stack);
        ["time", "everything"]
            .iter()
            .all(|n| account(&all, n)["state"] == "verified")
            .then_some(())
    })
    .await;
    assert!(back.is_some(), "{}", accounts(&stack));
    assert!(
        stack
            .wait_line("degraded: account gh is", Duration::from_secs(60))
            .await,
        "{:?}",
        stack.lines()
    );
    stack.clankie_ok(&["disconnect", "gh"]);
    // Healthy again once the readiness probe has seen it.
    let healthy = clankie_tests::eventually(Duration::from_secs(30), async || {
        let status = stack.clankie(&["status", "--json"]);
        let s: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status json");
        (s["healthy"] == true && status.status.code() == Some(0)).then_some(())
    })
    .await;
    assert!(healthy.is_some());
}

/// A caller's cancel reaches the upstream after dispatch: the gateway tells
/// mcp-host, which sends `notifications/cancelled` for that request, so the
/// upstream stops (its step log ends early), and the receipt settles
/// uncertain (the upstream sent no answer). Another member cannot cancel
/// the call: its receipt is not theirs.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_after_dispatch_stops_the_upstream_and_leaves_the_receipt_uncertain() {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    let stack = Stack::start().await.expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "edge_stepped").await;

    let receipt = "rcpt-cancel-0001";
    let mut params = CallToolRequestParams::new("clankie_call");
    params.arguments = json!({
        "name": "edge_stepped",
        "receiptId": receipt,
        "arguments": {"steps": 20, "seconds": 0.25, "tag": "cancelled"}
    })
    .as_object()
    .cloned();
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    assert!(
        clankie_tests::wait_file_line(&log, "cancelled:2", Duration::from_secs(20)).await,
        "{:?}",
        file_lines(&log)
    );
    handle
        .cancel(Some("changed my mind".into()))
        .await
        .expect("cancel");

    // The upstream stops: well short of its 20 steps (5 s of work).
    tokio::time::sleep(Duration::from_secs(6)).await;
    let steps = file_lines(&log)
        .iter()
        .filter(|l| l.starts_with("cancelled:"))
        .count();
    assert!(
        steps < 12,
        "the upstream ran on after the cancel: {steps} steps"
    );

    // The receipt says so, to its own caller only.
    let r = call(&client, "clankie_call", json!({"receiptId": receipt}))
        .await
        .expect("read back");
    let body = structured(&r);
    assert_eq!(
        r.meta.as_ref().and_then(|m| m.get("clankie/outcome")),
        Some(&json!("uncertain")),
        "{r:?}"
    );
    assert!(
        body.to_string().contains("notifications/cancelled"),
        "the receipt says what happened: {body}"
    );
    let other = stack.client(&stack.token("beta")).await.expect("other");
    let r = call(&other, "clankie_call", json!({"receiptId": receipt}))
        .await
        .expect("read back");
    assert_eq!(error_code(&r), "receipt_not_found", "{r:?}");
}

/// An upstream that does not implement cancellation answers within the
/// grace after a cancel: its answer, not "uncertain", settles the receipt,
/// since it proves what happened. (The Python SDK's servers never answer a
/// cancelled request, so this upstream is a plain JSON-RPC one.)
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_within_the_grace_after_a_cancel_settles_the_receipt() {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    let stack = Stack::start().await.expect("stack");
    let log = stack.state.path().join("edge.log");
    let deaf = clankie_tests::repo_root().join("tests/peers/deaf_server.py");
    let py = clankie_tests::python();
    stack.connect_stdio(
        "deaf",
        &[py.to_str().expect("utf8"), deaf.to_str().expect("utf8")],
        &[("EDGE_LOG", log.to_str().expect("utf8"))],
    );
    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "deaf_late").await;

    let receipt = "rcpt-grace-0001";
    let mut params = CallToolRequestParams::new("clankie_call");
    params.arguments = json!({
        "name": "deaf_late",
        "receiptId": receipt,
        "arguments": {"seconds": 0.5, "tag": "late"}
    })
    .as_object()
    .cloned();
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("sent");
    assert!(
        clankie_tests::wait_file_line(&log, "late", Duration::from_secs(20)).await,
        "{:?}",
        file_lines(&log)
    );
    handle
        .cancel(Some("changed my mind".into()))
        .await
        .expect("cancel");
    assert!(
        clankie_tests::wait_file_line(&log, "late:done", Duration::from_secs(20)).await,
        "the work finished: {:?}",
        file_lines(&log)
    );
    let settled = clankie_tests::eventually(Duration::from_secs(20), async || {
        let r = call(&client, "clankie_call", json!({"receiptId": receipt}))
            .await
            .ok()?;
        let outcome = r.meta.as_ref()?.get("clankie/outcome")?.clone();
        (outcome != json!("pending")).then_some(r)
    })
    .await
    .expect("settled");
    let outcome = settled.meta.as_ref().and_then(|m| m.get("clankie/outcome"));
    assert_eq!(outcome, Some(&json!("ok")), "{settled:?}");
    assert!(
        structured(&settled).to_string().contains("done late"),
        "the upstream's own answer is the receipt's: {settled:?}"
    );
}

/// An HTTP account at a URL that is no MCP endpoint (a plain web server's
/// root): the account's error says what the server answered and the URL to
/// try, with no Rust type names and no page markup.
#[tokio::test(flavor = "multi_thread")]
async fn an_http_account_at_the_wrong_path_says_the_url_to_try() {
    let stack = Stack::start().await.expect("stack");
    let port = clankie_tests::free_port();
    let web = tempfile::tempdir().expect("web root");
    let mut server = std::process::Command::new(clankie_tests::python())
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(web.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("http.server");
    let up = clankie_tests::eventually(Duration::from_secs(20), async || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    })
    .await;
    assert!(up.is_some(), "http.server listens");
    let out = stack.clankie(&[
        "connect",
        "web",
        "--url",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    let _ = server.kill();
    let _ = server.wait();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let accounts = clankie_tests::seat::json_of(&stack.clankie_ok(&["accounts", "--json"]));
    let error = accounts["accounts"][0]["lastError"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(error.contains("HTTP 501"), "{error}");
    assert!(
        error.contains(&format!("try http://127.0.0.1:{port}/mcp")),
        "{error}"
    );
    assert!(!error.contains("::") && !error.contains('<'), "{error}");
    assert!(!said.contains("::"), "{said}");
}
