//! Manual grants end to end: `clankie access issue` on the real stack, the
//! real `clankie mcp --grant` driven by the Python MCP SDK, real upstreams
//! (server-everything, the edge server, the Linear stand-in).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clankie_tests::seat::json_of;
use clankie_tests::{Stack, bin_dir, eventually, file_lines, python, repo_root};
use serde_json::{Value, json};

/// Issues a grant from `request` into a new file in `dir`, retrying while
/// the account is still verifying; returns what the CLI printed.
async fn issue(stack: &Stack, dir: &Path, name: &str, request: Value) -> (Value, PathBuf) {
    let req = dir.join(format!("{name}.request.json"));
    std::fs::write(&req, request.to_string()).expect("request");
    let out = dir.join(format!("{name}.grant.json"));
    let (r, o) = (req.display().to_string(), out.display().to_string());
    let printed = eventually(Duration::from_secs(30), async || {
        let run = stack.clankie(&["access", "issue", &r, "--out", &o]);
        run.status
            .success()
            .then(|| String::from_utf8_lossy(&run.stdout).to_string())
    })
    .await
    .unwrap_or_else(|| {
        let run = stack.clankie(&["access", "issue", &r, "--out", &o]);
        panic!("issue failed: {}", String::from_utf8_lossy(&run.stderr))
    });
    (json_of(&printed), out)
}

/// Runs `clankie mcp --grant FILE` under the Python SDK through `plan`.
fn session(stack: &Stack, file: &Path, plan: Value) -> Vec<Value> {
    let out = std::process::Command::new(python())
        .arg(repo_root().join("tests/clients/grant_session.py"))
        .arg(bin_dir().join("clankie"))
        .arg(file)
        .arg(plan.to_string())
        .env("CLANKIE_STATE", stack.state.path())
        .env("RUST_LOG", "warn")
        .output()
        .expect("grant session");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON from the session ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn code(answer: &Value) -> &str {
    answer["structured"]["error"]["code"].as_str().unwrap_or("")
}

/// Every file under `logs/`, as text.
fn all_logs(stack: &Stack) -> String {
    let mut text = String::new();
    if let Ok(dir) = std::fs::read_dir(stack.state.path().join("logs")) {
        for f in dir.flatten() {
            text.push_str(&std::fs::read_to_string(f.path()).unwrap_or_default());
        }
    }
    text
}

fn everything_request(ttl: u32) -> Value {
    json!({
        "principalId": "reviewer",
        "workId": "ENG-1",
        "server": "everything",
        "tools": [
            {"name": "echo"},
            {"name": "get-annotated-message",
             "arguments": {"messageType": "success"},
             "forbiddenArguments": ["includeImage"]}
        ],
        "ttlSeconds": ttl
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grant_lists_its_tools_by_real_name_and_holds_to_its_pins() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let dir = tempfile::tempdir().expect("dir");
    let (printed, file) = issue(&stack, dir.path(), "g", everything_request(900)).await;
    let grant_id = printed["grant"]["grantId"]
        .as_str()
        .expect("id")
        .to_string();
    assert_eq!(printed["grant"]["standing"], "active", "{printed}");

    // The bearer is in the new private file and nowhere else.
    let mode = std::fs::metadata(&file).expect("file").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let held: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("json");
    let bearer = held["bearer"].as_str().expect("bearer").to_string();
    assert!(bearer.starts_with("clkg_"));
    assert!(!printed.to_string().contains(&bearer));
    let again = stack.clankie(&[
        "access",
        "issue",
        &dir.path().join("g.request.json").display().to_string(),
        "--out",
        &file.display().to_string(),
    ]);
    assert!(!again.status.success(), "never over an existing file");

    let answers = session(
        &stack,
        &file,
        json!([
            {"list": true},
            {"call": "echo", "args": {"message": "hi"}},
            {"call": "get-annotated-message", "args": {"messageType": "error"}},
            {"call": "get-annotated-message", "args": {"messageType": "success", "includeImage": true}},
            {"call": "get-annotated-message", "args": {"messageType": "success"}},
            {"call": "get-sum", "args": {"a": 1, "b": 2}},
            {"call": "echo", "args": {"message": "once"}, "receipt": "grant-rcpt-0001"},
            {"call": "echo", "args": {"message": "once"}, "receipt": "grant-rcpt-0001"}
        ]),
    );
    assert_eq!(answers[0]["server"], "clankie-grant", "{answers:?}");
    let tools = answers[1]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["echo", "get-annotated-message"], "{answers:?}");
    assert!(tools[0]["inputSchema"]["properties"]["message"].is_object());
    // A call without pins passes, and the upstream's blocks come back.
    let echo = &answers[2];
    assert_eq!(echo["isError"], false, "{echo}");
    assert!(
        echo["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("hi"),
        "{echo}"
    );
    assert_eq!(echo["meta"]["clankie/outcome"], "ok", "{echo}");
    assert!(echo["meta"]["clankie/receiptId"].is_string());
    assert_eq!(
        code(&answers[3]),
        "grant_argument_mismatch",
        "{}",
        answers[3]
    );
    assert_eq!(
        code(&answers[4]),
        "grant_argument_forbidden",
        "{}",
        answers[4]
    );
    assert_eq!(answers[5]["isError"], false, "{}", answers[5]);
    // A tool the grant does not list is unknown on its door, as on the
    // fleet door: a protocol error, not a result.
    assert!(
        answers[6]["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown tool get-sum")),
        "{}",
        answers[6]
    );
    // The same receipt id reads the original: one dispatch.
    assert_eq!(answers[7]["content"], answers[8]["content"]);
    assert_eq!(answers[8]["meta"]["clankie/receiptId"], "grant-rcpt-0001");

    // Another grant cannot read this one's receipt, nor reach a seat.
    let (_, other) = issue(&stack, dir.path(), "other", everything_request(900)).await;
    let stolen = session(
        &stack,
        &other,
        json!([{"call": "echo", "args": {"message": "once"}, "receipt": "grant-rcpt-0001"}]),
    );
    assert_eq!(code(&stolen[1]), "receipt_conflict", "{stolen:?}");
    let auth = format!("Bearer {bearer}");
    let (status, _) = clankie_tests::http(
        &format!("{}/v1/fleet/seats/%251/tool-catalog", stack.url),
        "GET",
        &[("authorization", auth.as_str())],
        "",
    );
    assert!(
        status == 401 || status == 403,
        "a grant has no seat: {status}"
    );

    // Fleet tools off leaves the grant working.
    stack.clankie_ok(&["fleet", "set", "--tools", "off"]);
    let off = session(
        &stack,
        &file,
        json!([{"call": "echo", "args": {"message": "off"}}]),
    );
    assert_eq!(off[1]["isError"], false, "{off:?}");

    // The audit names the grant and its principal; no log holds the bearer.
    let audit = std::fs::read_dir(stack.state.path().join("audit"))
        .expect("audit")
        .flatten()
        .map(|f| std::fs::read_to_string(f.path()).unwrap_or_default())
        .collect::<String>();
    assert!(
        audit.contains(&format!("grant:{grant_id}:principal:reviewer")),
        "{audit}"
    );
    assert!(
        !all_logs(&stack).contains(&bearer),
        "a log holds the bearer"
    );
    assert!(!audit.contains(&bearer));

    // Revoked: listed as such, and the bearer opens nothing any more.
    stack.clankie_ok(&["access", "revoke", &grant_id]);
    let listed = json_of(&stack.clankie_ok(&["access", "list", "--json"]));
    let mine = listed["grants"]
        .as_array()
        .and_then(|g| {
            g.iter()
                .find(|g| g["grantId"] == grant_id.as_str())
                .cloned()
        })
        .expect("listed");
    assert_eq!(mine["standing"], "revoked", "{listed}");
    let after = session(
        &stack,
        &file,
        json!([{"call": "echo", "args": {"message": "late"}}]),
    );
    let text = after.last().expect("answer").to_string();
    assert!(text.contains("grant_revoked"), "{after:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn expiry_refuses_and_an_endpoint_in_the_clear_is_never_used() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let dir = tempfile::tempdir().expect("dir");
    let (_, short) = issue(&stack, dir.path(), "short", everything_request(1)).await;
    // The clock, not the test, ends it: wait past its lifetime.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let expired = session(
        &stack,
        &short,
        json!([{"call": "echo", "args": {"message": "x"}}]),
    );
    assert!(
        expired
            .last()
            .expect("answer")
            .to_string()
            .contains("grant_expired"),
        "{expired:?}"
    );

    // A forged grant bearer opens nothing.
    let forged = format!("Bearer clkg_{}", "0".repeat(64));
    let (status, body) = clankie_tests::http(
        &stack.mcp_url,
        "POST",
        &[
            ("authorization", forged.as_str()),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"forger","version":"0"}}}"#,
    );
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("grant_invalid"), "{body}");

    // Issuing for an endpoint in the clear is refused before any grant.
    let req = dir.path().join("short.request.json").display().to_string();
    let out = dir.path().join("clear.grant.json").display().to_string();
    let clear = stack.clankie(&[
        "access",
        "issue",
        &req,
        "--out",
        &out,
        "--endpoint",
        "http://10.1.2.3:7755/mcp",
    ]);
    assert!(!clear.status.success());
    assert!(String::from_utf8_lossy(&clear.stderr).contains("HTTPS"));
    let listed = json_of(&stack.clankie_ok(&["access", "list", "--json"]));
    assert_eq!(
        listed["grants"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    // A file pointed at such an endpoint is refused by the bridge itself.
    let mut held: Value =
        serde_json::from_slice(&std::fs::read(&short).expect("read")).expect("json");
    held["endpoint"] = json!("http://10.1.2.3:7755/mcp");
    let moved = dir.path().join("moved.grant.json");
    std::fs::write(&moved, held.to_string()).expect("write");
    let refused = session(&stack, &moved, json!([{"list": true}]));
    assert!(
        refused.last().expect("answer").get("fatal").is_some(),
        "{refused:?}"
    );

    // Legacy records: inspectable, no bearer, no authority; fleet refuses.
    let kept =
        json_of(&stack.clankie_ok(&["access", "project", "alpha", "everything", "--tool", "echo"]));
    assert_eq!(kept["record"]["standing"], "retired", "{kept}");
    let fleet = stack.clankie(&["access", "fleet"]);
    assert_eq!(fleet.status.code(), Some(1));
}

/// A revoke that lands while a grant call is running on the edge server's
/// slow tool: that call was dispatched and finishes once, the grant's
/// session closes, and nothing the session asks after it is dispatched.
#[tokio::test(flavor = "multi_thread")]
async fn a_revoke_closes_the_session_and_nothing_dispatches_after_it() {
    let stack = Stack::start().await.expect("stack");
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let (printed, file) = issue(
        &stack,
        dir.path(),
        "edge",
        json!({"principalId": "w1", "server": "edge", "tools": [{"name": "slow"}], "ttlSeconds": 600}),
    )
    .await;
    let grant_id = printed["grant"]["grantId"]
        .as_str()
        .expect("id")
        .to_string();
    let plan = json!([
        {"call": "slow", "args": {"seconds": 0.05, "tag": "before"}},
        {"call": "slow", "args": {"seconds": 3, "tag": "inflight"}},
        {"call": "slow", "args": {"seconds": 0.05, "tag": "after"}}
    ]);
    let (stack_ref, file_ref, log_ref) = (&stack, file.clone(), &log);
    let answers = std::thread::scope(|s| {
        let run = s.spawn(move || session(stack_ref, &file_ref, plan));
        // The revoke lands once the slow call is running upstream.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(log_ref)
            .unwrap_or_default()
            .contains("inflight")
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        stack_ref.clankie_ok(&["access", "revoke", &grant_id]);
        run.join().expect("session")
    });
    assert_eq!(answers[1]["isError"], false, "{answers:?}");
    // The running call is answered at once, as possibly applied, before
    // its session closes.
    let running = &answers[2];
    assert_eq!(running["structured"]["outcome"], "uncertain", "{running}");
    assert!(
        running.to_string().contains("revoked while this call ran"),
        "{running}"
    );
    // Refused before anything left, as such (not "uncertain").
    let after = &answers[3];
    assert!(
        after.get("error").is_some()
            || code(after) == "grant_revoked"
            || after.to_string().contains("grant_revoked"),
        "the call after the revoke was refused: {after}"
    );
    assert_ne!(after["structured"]["outcome"], "uncertain", "{after}");
    let ran = file_lines(&log);
    assert_eq!(
        ran.iter().filter(|l| l.contains("inflight")).count(),
        1,
        "the dispatched call ran once: {ran:?}"
    );
    assert!(
        !ran.iter().any(|l| l.contains("after")),
        "nothing dispatched after the revoke: {ran:?}"
    );
    let listed = json_of(&stack.clankie_ok(&["access", "list", "--json"]));
    assert!(listed.to_string().contains("revoked"), "{listed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn worker_publishing_needs_a_grant_pinned_to_one_persona() {
    let stack = Stack::start().await.expect("stack");
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("standin.log");
    let py = python().display().to_string();
    let standin = repo_root()
        .join("tests/peers/linear_standin.py")
        .display()
        .to_string();
    let log_s = log.display().to_string();
    // The same tools under an account not named linear: the rule is the
    // tool's, not the account's name.
    stack.connect_stdio("tracker-two", &[&py, &standin, &log_s], &[]);
    let req = dir.path().join("nopersona.json");
    std::fs::write(
        &req,
        json!({"principalId": "w1", "server": "tracker-two",
               "tools": [{"name": "create_worker_comment"}], "ttlSeconds": 60})
        .to_string(),
    )
    .expect("request");
    let out = dir.path().join("nopersona.grant.json");
    let refused = eventually(Duration::from_secs(30), async || {
        let run = stack.clankie(&[
            "access",
            "issue",
            &req.display().to_string(),
            "--out",
            &out.display().to_string(),
        ]);
        let err = String::from_utf8_lossy(&run.stderr).to_string();
        (!err.contains("account_unavailable")).then_some((run.status.success(), err))
    })
    .await
    .expect("an answer");
    assert!(
        !refused.0 && refused.1.contains("tool_not_granted"),
        "{refused:?}"
    );
    assert!(!out.exists());

    let (_, file) = issue(
        &stack,
        dir.path(),
        "persona",
        json!({"principalId": "w1", "server": "tracker-two",
               "tools": [{"name": "create_worker_comment", "arguments": {"personaId": "p-1"}}],
               "ttlSeconds": 60}),
    )
    .await;
    let answers = session(
        &stack,
        &file,
        json!([
            {"call": "create_worker_comment", "args": {"issueId": "ENG-1", "body": "b", "personaId": "p-1"}},
            {"call": "create_worker_comment", "args": {"issueId": "ENG-1", "body": "b", "personaId": "p-2"}}
        ]),
    );
    assert_eq!(answers[1]["isError"], false, "{answers:?}");
    assert_eq!(code(&answers[2]), "grant_argument_mismatch", "{answers:?}");
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(ran.matches("create_worker_comment").count(), 1, "{ran}");
    assert!(!ran.contains("p-2"), "{ran}");
}

/// `clankie access NAME verify`, once the account has verified its
/// connection: whether it succeeded, and what it printed.
async fn verify(stack: &Stack, name: &str) -> (bool, String) {
    eventually(Duration::from_secs(30), async || {
        let run = stack.clankie(&["access", name, "verify"]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        (!text.contains("not connected and verified")).then_some((run.status.success(), text))
    })
    .await
    .expect("the account verified its connection")
}

/// (Re)connects the Linear stand-in as `name`, answering as `env`.
fn standin(stack: &Stack, name: &str, log: &Path, env: &[(&str, &str)]) {
    stack.connect_standin(name, log, env);
}

fn standing(stack: &Stack, grant_id: &str) -> String {
    let listed = json_of(&stack.clankie_ok(&["access", "list", "--json"]));
    listed["grants"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["grantId"] == grant_id))
        .and_then(|g| g["standing"].as_str())
        .unwrap_or("missing")
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn verification_keeps_grants_on_the_same_identity_and_ends_them_on_a_change() {
    let stack = Stack::start().await.expect("stack");
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("standin.log");
    standin(
        &stack,
        "acme",
        &log,
        &[("STANDIN_USER", "u1"), ("STANDIN_WORKSPACE", "w1")],
    );
    // Connecting read the identity the server offers, and recorded it.
    let shown = json_of(&stack.clankie_ok(&["access", "acme", "--json"]));
    assert_eq!(shown["providerIdentity"]["userId"], "u1", "{shown}");
    assert_eq!(shown["providerIdentity"]["email"], "u1@example.test");
    assert_eq!(shown["providerIdentity"]["workspaceId"], "w1", "{shown}");

    let (printed, _) = issue(
        &stack,
        dir.path(),
        "acme",
        json!({"principalId": "w1", "server": "acme", "tools": [{"name": "get_issue"}], "ttlSeconds": 600}),
    )
    .await;
    let grant_id = printed["grant"]["grantId"]
        .as_str()
        .expect("id")
        .to_string();

    // The same identity again: the grant holds.
    let (ok, same) = verify(&stack, "acme").await;
    assert!(ok && json_of(&same)["change"] == "same", "{same}");
    assert_eq!(standing(&stack, &grant_id), "active");

    // A failed verification changes nothing, as it connects or by hand.
    standin(&stack, "acme", &log, &[("STANDIN_IDENTITY_FAIL", "1")]);
    assert_eq!(standing(&stack, &grant_id), "active");
    let (ok, failed) = verify(&stack, "acme").await;
    assert!(!ok && failed.contains("account_unavailable"), "{failed}");
    assert_eq!(standing(&stack, &grant_id), "active");
    let shown = json_of(&stack.clankie_ok(&["access", "acme", "--json"]));
    assert_eq!(shown["providerIdentity"]["userId"], "u1", "{shown}");

    // Another user behind the same account: its grants end.
    standin(
        &stack,
        "acme",
        &log,
        &[("STANDIN_USER", "u2"), ("STANDIN_WORKSPACE", "w1")],
    );
    // Connecting recorded the new user at once, and the grant ended.
    assert_eq!(standing(&stack, &grant_id), "invalidated");
    let shown = json_of(&stack.clankie_ok(&["access", "acme", "--json"]));
    assert_eq!(shown["providerIdentity"]["userId"], "u2", "{shown}");
    let (ok, again) = verify(&stack, "acme").await;
    assert!(ok && json_of(&again)["change"] == "same", "{again}");
}

/// The MCP Inspector (CLI mode) drives `clankie mcp --grant FILE` over
/// stdio: the granted tools under their real names, and an upstream image
/// block through the grant exactly as the upstream sent it.
#[tokio::test(flavor = "multi_thread")]
async fn the_inspector_lists_and_calls_a_grant_over_stdio() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let dir = tempfile::tempdir().expect("dir");
    let (_, file) = issue(
        &stack,
        dir.path(),
        "inspect",
        json!({"principalId": "rev", "server": "everything",
               "tools": [{"name": "echo"}, {"name": "get-tiny-image"}], "ttlSeconds": 300}),
    )
    .await;
    let inspector = |args: &[&str]| -> (i32, Value, String) {
        let out = std::process::Command::new("mcp-inspector")
            .arg("--cli")
            .arg(bin_dir().join("clankie"))
            .args(["mcp", "--grant"])
            .arg(&file)
            .args([
                "-e",
                &format!("CLANKIE_STATE={}", stack.state.path().display()),
            ])
            .args(args)
            .env("PATH", clankie_tests::peer_path())
            .output()
            .expect("run mcp-inspector");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        (
            out.status.code().unwrap_or(-1),
            serde_json::from_str(&stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, listed, err) = inspector(&["--method", "tools/list"]);
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["echo", "get-tiny-image"], "{listed}");
    let (code, image, err) =
        inspector(&["--method", "tools/call", "--tool-name", "get-tiny-image"]);
    assert_eq!(code, 0, "{err}");
    let block = image["content"]
        .as_array()
        .and_then(|c| c.iter().find(|b| b["type"] == "image").cloned())
        .unwrap_or_else(|| panic!("an image block: {image}"));
    let data = block["data"].as_str().expect("base64 data");
    assert!(data.starts_with("iVBORw0KGgo"), "a PNG, as sent: {block}");
    assert_eq!(block["mimeType"], "image/png");
    assert_eq!(image["_meta"]["clankie/outcome"], "ok", "{image}");
}

/// `project set --linear-project` names only a project the connected Linear
/// account knows; anything else (or no Linear account) leaves the settings
/// as they were.
#[tokio::test(flavor = "multi_thread")]
async fn a_linear_project_is_bound_only_once_linear_knows_it() {
    let stack = Stack::start().await.expect("stack");
    let _ws = stack.add_project("alpha", &[]);
    let known = "11111111-2222-4333-8444-555555555555";
    let unknown = "99999999-2222-4333-8444-555555555555";
    let set = |uuid: &str| {
        let rev =
            json_of(&stack.clankie_ok(&["project", "list", "--json"]))["projects"][0]["revision"]
                .as_u64()
                .expect("revision")
                .to_string();
        stack.clankie(&[
            "project",
            "set",
            "alpha",
            "--revision",
            &rev,
            "--linear-project",
            uuid,
        ])
    };
    let revision = || {
        json_of(&stack.clankie_ok(&["project", "list", "--json"]))["projects"][0]["revision"]
            .clone()
    };
    let none = set(known);
    assert!(!none.status.success(), "no Linear account, no validation");
    assert!(String::from_utf8_lossy(&none.stderr).contains("account_unavailable"));
    let dir = tempfile::tempdir().expect("dir");
    stack.connect_standin(
        "linear",
        &dir.path().join("log"),
        &[("STANDIN_PROJECTS", known)],
    );
    let before = revision();
    let wrong = set(unknown);
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("tracker_not_found"));
    assert_eq!(
        revision(),
        before,
        "a failed validation leaves the settings unchanged"
    );
    let right = set(known);
    assert!(
        right.status.success(),
        "{}",
        String::from_utf8_lossy(&right.stderr)
    );
    let shown = json_of(&String::from_utf8_lossy(&right.stdout));
    assert_eq!(shown["linearProjectId"], known, "{shown}");
}

/// A grant call hears its own upstream's progress, and the log lines the
/// host can place on it (sent while it is the one call in flight on the
/// account). Between its calls the account's lines are not its to hear.
#[tokio::test(flavor = "multi_thread")]
async fn a_grant_call_hears_its_progress_and_only_the_lines_of_its_own_calls() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let dir = tempfile::tempdir().expect("dir");
    let (_, file) = issue(
        &stack,
        dir.path(),
        "hear",
        json!({"principalId": "rev", "server": "everything",
               "tools": [{"name": "trigger-long-running-operation"},
                         {"name": "toggle-simulated-logging"}],
               "ttlSeconds": 300}),
    )
    .await;
    let long = |secs: u32| {
        json!({"call": "trigger-long-running-operation",
               "args": {"duration": secs, "steps": secs}, "progress": true})
    };
    let seen = session(
        &stack,
        &file,
        json!([
            long(2),
            {"level": "debug"},
            {"call": "toggle-simulated-logging"},
            // One simulated line every 5 s: at least one lands in 7 s.
            long(7),
            {"lines": true},
            {"sleep": 11},
            {"lines": true},
            {"call": "toggle-simulated-logging"}
        ]),
    );
    assert_eq!(seen[1]["isError"], false, "{seen:?}");
    assert_eq!(
        seen[1]["progress"],
        json!([[1.0, 2.0], [2.0, 2.0]]),
        "both steps under the harness's token: {seen:?}"
    );
    assert_eq!(seen[4]["progress"].as_array().map(Vec::len), Some(7));
    let during = seen[5]["lines"].as_array().expect("lines").len();
    assert!(during >= 1, "a line while its call ran: {seen:?}");
    // Nothing of the grant's was in flight for 11 s: two simulated lines
    // went by, and neither was its to hear.
    assert_eq!(
        seen[7]["lines"].as_array().expect("lines").len(),
        during,
        "{seen:?}"
    );
}
