//! The trust boundary, tried the way a hostile worker would: a process in
//! one pane, and one in no pane at all, running as the same user. Every
//! identity must stay the one the kernel proved.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use clankie_tests::git::{commit, diff, patch_id, patch_id_of, work_repo};
use clankie_tests::seat::{Seat, json_of};
use clankie_tests::{
    Stack, StackOptions, TmuxServer, bin_dir, eventually, http_response, peer_path, python,
    repo_root, wait_json,
};
use serde_json::{Value, json};

/// A stack with a linked tmux session, project `alpha` and one lead.
async fn seat_stack() -> (Stack, TmuxServer, tempfile::TempDir, String) {
    let stack = Stack::start().await.expect("stack");
    let tmux = stack.link_tmux("work");
    let workspace = stack.add_project("alpha", &[]);
    let lead = stack.add_lead("Lead");
    (stack, tmux, workspace, lead)
}

fn fleet_status(stack: &Stack) -> Value {
    json_of(&stack.clankie_ok(&["fleet", "status", "--json"]))
}

fn pane_pid(tmux: &TmuxServer, pane: &str) -> i32 {
    tmux.run(&["display-message", "-p", "-t", pane, "#{pane_pid}"])
        .parse()
        .expect("pane pid")
}

fn logs(stack: &Stack) -> Vec<(String, String)> {
    let dir = stack.state.path().join("logs");
    std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().to_string(),
                        std::fs::read_to_string(e.path()).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every RPC the probe tried answered `internal_caller_refused`, except
/// health: it reads no caller and says only serving or not, so stock tools
/// ask it without a credential (docs/SECURITY.md).
fn all_refused(seen: &Value) {
    let calls = seen.as_object().expect("probe results");
    assert!(calls.len() >= 20, "the probe tried every socket: {seen}");
    for (rpc, answer) in calls {
        let expected = if rpc.ends_with(".Health") {
            "ok"
        } else {
            "internal_caller_refused"
        };
        assert_eq!(answer, expected, "{rpc}: {seen}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_panes_pid_named_to_any_internal_socket_gets_nothing() {
    let (stack, tmux, _workspace, conversation) = seat_stack().await;
    stack.clankie_ok(&["tracker", "team", "ENG", "--name", "Engineering"]);
    let dir = tempfile::tempdir().expect("dir");
    let victim = Seat::hire(&stack, dir.path(), "victim", &conversation).await;
    let victim_pid = pane_pid(&tmux, victim.hire["paneId"].as_str().expect("pane"));
    let probe = bin_dir().join("clankie-probe");
    let state = stack.state.path().display().to_string();

    // A process in another pane of the linked session.
    let from_pane = dir.path().join("probe-pane.json");
    tmux.run(&[
        "split-window",
        "-t",
        "work",
        &format!(
            "exec {} {state} {victim_pid} {}",
            probe.display(),
            from_pane.display()
        ),
    ]);
    let seen = wait_json(&from_pane, Duration::from_secs(60))
        .await
        .expect("the pane's probe finished");
    all_refused(&seen);

    // A process in no pane at all.
    let from_nowhere = dir.path().join("probe-none.json");
    let status = std::process::Command::new(&probe)
        .args([
            &state,
            &victim_pid.to_string(),
            &from_nowhere.display().to_string(),
        ])
        .status()
        .expect("probe");
    assert!(status.success());
    all_refused(&json_of(
        &std::fs::read_to_string(&from_nowhere).expect("probe result"),
    ));

    // Even holding the owner credential (readable with the sandbox off),
    // nobody but the gateway names a process.
    let as_owner = dir.path().join("probe-owner.json");
    let status = std::process::Command::new(&probe)
        .args([
            &state,
            &victim_pid.to_string(),
            &as_owner.display().to_string(),
            "owner",
        ])
        .status()
        .expect("probe");
    assert!(status.success());
    let seen = json_of(&std::fs::read_to_string(&as_owner).expect("probe result"));
    assert_eq!(
        seen["admission.ProveLocal"], "internal_caller_refused",
        "{seen}"
    );
    assert_eq!(
        seen["admission.ObserveSeat"], "internal_caller_refused",
        "{seen}"
    );
    // ... nor a machine's key.
    for rpc in ["admission.EnrolMachine", "admission.ProveMachine"] {
        assert_eq!(seen[rpc], "internal_caller_refused", "{rpc}: {seen}");
    }

    // Nothing was recorded: no message, no claim, no report, no tracker
    // write, no setting, no link, no hire, no switch.
    let polled = victim
        .run(json!({ "http": ["GET", "/v1/fleet/seats/{pane}/mailbox?wait=0", null] }))
        .await;
    assert_eq!(polled["status"], 200, "{polled}");
    assert!(victim.inbox().is_empty(), "{:?}", victim.inbox());
    let transcript = stack.clankie_ok(&["transcript", &conversation]);
    assert!(!transcript.contains("from the probe"), "{transcript}");
    let issues = stack.clankie_ok(&["tracker", "call", "list_issues", r#"{"team":"ENG"}"#]);
    assert!(!issues.contains("from the probe"), "{issues}");
    let status = fleet_status(&stack);
    assert_eq!(status["tools"], "connected", "{status}");
    assert!(
        !status["links"]
            .as_array()
            .is_some_and(|l| l.iter().any(|l| l["fleet"] == "stolen")),
        "{status}"
    );
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    assert_eq!(
        roster["hires"].as_array().map(Vec::len),
        Some(1),
        "{roster}"
    );
    let auto = stack.clankie_ok(&["auto", "status"]);
    assert!(auto.to_lowercase().contains("off"), "{auto}");
    assert!(
        stack
            .clankie_ok(&["review", "list", "--json"])
            .contains("\"candidates\": []"),
        "no candidate"
    );

    // Each refusal was logged once, with its reason and never the pid.
    let pid = victim_pid.to_string();
    let mut refusals = 0;
    for (name, text) in logs(&stack) {
        for l in text.lines().filter(|l| l.contains("internal.refused")) {
            refusals += 1;
            assert!(l.contains("internal_caller_refused"), "{name}: {l}");
            // Whole numbers only: a timestamp's digits are not the pid.
            let named = l.split(|c: char| !c.is_ascii_digit()).any(|n| n == pid);
            assert!(!named, "{name} names the pid: {l}");
        }
    }
    assert!(refusals >= 40, "{refusals} refusals logged");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_sandbox_on_and_no_bwrap_the_hire_is_refused() {
    // A PATH with tmux and git but no bwrap.
    let bin = tempfile::tempdir().expect("bin");
    for tool in ["tmux", "git"] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is installed"));
        std::os::unix::fs::symlink(found, bin.path().join(tool)).expect("link");
    }
    let stack = Stack::start_with(StackOptions {
        path: Some(bin.path().display().to_string()),
        ..Default::default()
    })
    .await
    .expect("stack");
    let tmux = stack.link_tmux("work");
    let _workspace = stack.add_project("alpha", &[]);
    stack.clankie_ok(&["fleet", "set", "--worker-sandbox", "on"]);
    let panes = || tmux.run(&["list-panes", "-a", "-F", "#{pane_id}"]);
    let before = panes();
    let out = stack.clankie(&["hire", "--project", "alpha", "--", "sleep", "60"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("worker_sandbox_unavailable"), "{err}");
    assert_eq!(panes(), before, "no pane was opened");
    let roster = json_of(&stack.clankie_ok(&["roster", "--json"]));
    assert_eq!(roster["hires"], json!([]), "{roster}");
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"security","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

fn mcp(
    stack: &Stack,
    method: &str,
    token: &str,
    session: Option<&str>,
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(s) = session {
        headers.push(("Mcp-Session-Id", s));
    }
    http_response(&stack.mcp_url, method, &headers, body)
}

fn code(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap_or_default()["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_answers_only_the_principal_that_opened_it() {
    let stack = Stack::start().await.expect("stack");
    let mine = stack.token("alpha");
    let theirs = stack.token("alpha");
    let (status, headers, _) = mcp(&stack, "POST", &mine, None, INIT);
    assert_eq!(status, 200);
    let session = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .expect("a session id");
    let (status, _, _) = mcp(&stack, "POST", &mine, Some(&session), INITIALIZED);
    assert_eq!(status, 202);

    // Another link of the same fleet names the session: refused, as if it
    // did not exist, for requests and for DELETE.
    let (status, _, body) = mcp(&stack, "POST", &theirs, Some(&session), LIST);
    assert_eq!(
        (status, code(&body)),
        (404, "session_not_found".into()),
        "{body}"
    );
    let (status, _, body) = mcp(&stack, "DELETE", &theirs, Some(&session), "");
    assert_eq!(
        (status, code(&body)),
        (404, "session_not_found".into()),
        "{body}"
    );
    let (status, _, unknown) = mcp(&stack, "POST", &theirs, Some("no-such-session"), LIST);
    assert_eq!((status, code(&unknown)), (404, "session_not_found".into()));
    assert_eq!(unknown, body, "nothing tells them apart");

    // The session is untouched for the one that opened it.
    let (status, _, listed) = mcp(&stack, "POST", &mine, Some(&session), LIST);
    assert_eq!(status, 200, "{listed}");
    assert!(listed.contains("clankie_call"), "{listed}");
    let (status, _, _) = mcp(&stack, "DELETE", &mine, Some(&session), "");
    assert!((200..300).contains(&status), "{status}");

    // Session ids never reach a log.
    for (name, text) in logs(&stack) {
        assert!(!text.contains(&session), "{name} names the session id");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receipt_read_from_another_pane_is_not_found() {
    let (stack, _tmux, _workspace, conversation) = seat_stack().await;
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let dir = tempfile::tempdir().expect("dir");
    let a = Seat::hire(&stack, dir.path(), "a", &conversation).await;
    let b = Seat::hire(&stack, dir.path(), "b", &conversation).await;
    let call = json!({
        "name": "time_get_current_time",
        "arguments": { "timezone": "Etc/UTC" },
        "receiptId": "rcpt-security-0001",
    });
    let first = a.call("clankie_call", call.clone()).await;
    assert_eq!(first["result"]["outcome"], "ok", "{first}");

    // Another pane of the same fleet: not found, exactly as an unused id.
    let read = b
        .call("clankie_call", json!({ "receiptId": "rcpt-security-0001" }))
        .await;
    assert_eq!(read["isError"], true, "{read}");
    assert_eq!(
        read["result"]["error"]["code"], "receipt_not_found",
        "{read}"
    );
    let unused = b
        .call("clankie_call", json!({ "receiptId": "rcpt-security-9999" }))
        .await;
    assert_eq!(
        read["result"]["error"]["message"]
            .as_str()
            .map(|m| m.replace("0001", "9999")),
        unused["result"]["error"]["message"]
            .as_str()
            .map(str::to_string),
        "nothing tells them apart"
    );
    // Repeating the very call under that id reads nothing of it either.
    let replay = b.call("clankie_call", call).await;
    assert_eq!(
        replay["result"]["error"]["code"], "receipt_conflict",
        "{replay}"
    );
    assert!(!replay.to_string().contains("Etc/UTC\""), "{replay}");

    // The caller itself still reconciles it.
    let mine = a
        .call("clankie_call", json!({ "receiptId": "rcpt-security-0001" }))
        .await;
    assert_eq!(mine["result"]["outcome"], "ok", "{mine}");
    assert_eq!(mine["result"]["fromReceipt"], true, "{mine}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_review_holds_only_what_its_bytes_say_from_inside_the_workspaces() {
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let repos = tempfile::tempdir().expect("repos");
    let (work, base) = work_repo(repos.path(), "work");
    let head = commit(&work, &[("src/feature.txt", b"the feature\n")], "feature");
    let (outside, outside_base) = work_repo(repos.path(), "outside");
    let outside_head = commit(&outside, &[("other.txt", b"not ours\n")], "other");
    std::os::unix::fs::symlink(&outside, work.join("escape")).expect("symlink");
    stack.clankie_ok(&[
        "project",
        "add",
        "alpha",
        "--workspace",
        &work.display().to_string(),
        "--reviewer",
    ]);
    let conversation = stack.add_lead("Lead");
    let dir = tempfile::tempdir().expect("dir");
    let author = Seat::hire(&stack, dir.path(), "author", &conversation).await;
    let _reviewer = Seat::hire_as(&stack, dir.path(), "reviewer", &conversation, "reviewer").await;
    let submit = |checkout: &Path, head: &str, base: &str, patch: &[u8], patch_id: &str| {
        json!({ "http": ["POST", "/v1/fleet/seats/{pane}/review-candidates", {
            "checkout": checkout.display().to_string(),
            "head": head, "base": base, "patchId": patch_id,
            "patch": base64::engine::general_purpose::STANDARD.encode(patch),
            "summary": "a change",
        }]})
    };

    // Bytes that are not what the claimed patch-id names.
    let patch = diff(&work, &base);
    let real = patch_id_of(&patch);
    let other = patch_id(&outside, &outside_base);
    let r = author
        .run(submit(&work, &head, &base, &patch, &other))
        .await;
    assert_eq!(r["status"], 409, "{r}");
    assert_eq!(r["body"]["error"]["code"], "patch_mismatch", "{r}");

    // A checkout outside the project's workspaces, directly or through a
    // symlink inside one.
    let outside_patch = diff(&outside, &outside_base);
    for checkout in [outside.clone(), work.join("escape")] {
        let r = author
            .run(submit(
                &checkout,
                &outside_head,
                &outside_base,
                &outside_patch,
                &other,
            ))
            .await;
        assert_eq!(r["status"], 400, "{r}");
        assert_eq!(r["body"]["error"]["code"], "invalid_argument", "{r}");
        assert!(
            r["body"]["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("workspaces"),
            "{r}"
        );
    }
    let listed = json_of(&stack.clankie_ok(&["review", "list", "--json"]));
    assert_eq!(listed["candidates"], json!([]), "nothing was stored");

    // The honest submission goes through with the id the service computed.
    let ok = author.run(submit(&work, &head, &base, &patch, &real)).await;
    assert_eq!(ok["status"], 200, "{ok}");
    assert_eq!(ok["body"]["patchId"], real.as_str(), "{ok}");

    // A change over the quota: the bridge stops reading and sends nothing.
    // Random bytes: git's binary diff cannot shrink them.
    let mut noise = vec![0u8; 5 << 20];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").expect("urandom"),
        &mut noise,
    )
    .expect("random bytes");
    commit(&work, &[("big.bin", &noise)], "big");
    let big = author
        .call(
            "submit_for_review",
            json!({ "checkout": work.display().to_string(), "summary": "big", "base": base }),
        )
        .await;
    assert_eq!(big["result"]["error"]["code"], "payload_too_large", "{big}");
    let listed = json_of(&stack.clankie_ok(&["review", "list", "--json"]));
    assert_eq!(listed["candidates"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_process_with_the_members_old_pid_cannot_write_as_it() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this scenario chooses a pid through ns_last_pid: run as root (CI does)"
    );
    let stack = Stack::start().await.expect("stack");
    let tmux = stack.link_tmux("work");
    let out = stack.state.path().join("reused.json");
    tmux.run(&[
        "split-window",
        "-t",
        "work",
        &format!(
            "exec env PATH={} {} {} reused {} {}",
            peer_path(),
            python().display(),
            repo_root().join("tests/clients/shared_fd.py").display(),
            stack.state.path().display(),
            out.display()
        ),
    ]);
    let seen = wait_json(&out, Duration::from_secs(120))
        .await
        .expect("the pane's client finished");
    let first = seen["member_first"]["status"].as_u64().unwrap_or(0);
    assert!(first != 403 && first != 503 && first != 0, "{seen}");
    assert_eq!(seen["same_pid_new_process"]["status"], 403, "{seen}");
    assert_eq!(
        seen["same_pid_new_process"]["code"],
        "local_process_membership_required"
    );
    let status = fleet_status(&stack);
    assert!(
        status["localProofs"]["refusals"]["shared_descriptor"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "the writer was told apart by identity, not pid: {status}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hire_words_are_never_shell_interpreted_and_names_and_text_are_inert() {
    let (stack, tmux, workspace, conversation) = seat_stack().await;

    // A one-word command is a command name, never a shell line.
    let marks = tempfile::tempdir().expect("marks");
    let a = marks.path().join("a");
    let b = marks.path().join("b");
    let line = format!("touch {}; touch {}", a.display(), b.display());
    let hired = json_of(&stack.clankie_ok(&[
        "hire",
        "--project",
        "alpha",
        "--conversation",
        &conversation,
        "--",
        &line,
    ]));
    let pane = hired["paneId"].as_str().expect("pane").to_string();
    // The pane closes once its command has run (or failed to start).
    let gone = eventually(Duration::from_secs(30), async || {
        let panes = tmux.run(&["list-panes", "-a", "-F", "#{pane_id}"]);
        (!panes.lines().any(|p| p == pane)).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the hired pane's command never ended");
    assert!(!a.exists() && !b.exists(), "the shell ran the words");

    // A control character in a word is refused: typed into a Herdr pane,
    // ^C or a newline would act before any quoting does.
    let out = stack.clankie(&["hire", "--project", "alpha", "--", "echo", "a\u{3}b"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_argument"));

    // Project names cannot climb folders.
    let ws = workspace.path().display().to_string();
    for name in [".", ".."] {
        let out = stack.clankie(&["project", "add", name, "--workspace", &ws]);
        assert!(!out.status.success(), "{name}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_argument"));
    }

    // Control characters reach the owner's terminal as escapes only.
    let evil = "lead \u{1b}]0;owned\u{7} \u{9b}31m";
    stack.clankie_ok(&["lead", "add", evil]);
    let listed = stack.clankie_ok(&["lead", "list"]);
    assert!(listed.contains("\\u{1b}"), "{listed}");
    assert!(
        !listed.chars().any(|c| c.is_control() && c != '\n'),
        "{listed:?}"
    );
    let dir = tempfile::tempdir().expect("dir");
    let seat = Seat::hire(&stack, dir.path(), "w", &conversation).await;
    let r = seat
        .call(
            "message_clankie",
            json!({ "text": "csi \u{9b}31m red \u{7f}" }),
        )
        .await;
    assert_eq!(r["isError"], false, "{r}");
    let transcript = stack.clankie_ok(&["transcript", &conversation]);
    assert!(transcript.contains("red"), "{transcript}");
    assert!(
        !transcript.chars().any(|c| c.is_control() && c != '\n'),
        "{transcript:?}"
    );
    let roster = stack.clankie_ok(&["roster"]);
    assert!(!roster.chars().any(|c| c.is_control() && c != '\n'));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_herdr_hire_starts_under_bubblewrap_too() {
    let stack = Stack::start().await.expect("stack");
    let mut herdr = clankie_tests::HerdrFixture::start(
        &format!(r#"{{"w1:p1": {}}}"#, std::process::id()),
        None,
    )
    .await;
    let socket = herdr.socket.display().to_string();
    stack.clankie_ok(&["fleet", "link", "--herdr", "--socket", &socket]);
    let _workspace = stack.add_project("gamma", &[]);
    stack.clankie_ok(&["fleet", "set", "--worker-sandbox", "on"]);
    let hire = json_of(&stack.clankie_ok(&[
        "hire",
        "--project",
        "gamma",
        "--",
        "claude",
        "--model",
        "it's fine",
    ]));
    assert_eq!(hire["sandboxed"], true, "{hire}");
    let line = herdr
        .acts_json()
        .iter()
        .find(|a| a["method"] == "pane.send_text")
        .and_then(|a| a["params"]["text"].as_str())
        .expect("the command line")
        .to_string();
    assert!(line.starts_with("exec '/"), "{line}");
    assert!(line.contains("/bwrap' '--unshare-user'"), "{line}");
    assert!(line.contains("'--unshare-pid'"), "{line}");
    let folder = herdr.socket.parent().expect("folder").display().to_string();
    assert!(
        line.contains(&format!("'--tmpfs' '{folder}'")),
        "the Herdr socket's folder is covered: {line}"
    );
    let state = std::fs::canonicalize(stack.state.path()).expect("state");
    assert!(
        line.contains(&format!("'--tmpfs' '{}'", state.display())),
        "{line}"
    );
    assert!(
        line.ends_with("'--' 'claude' '--model' 'it'\\''s fine'\n"),
        "{line}"
    );
    let found = herdr.stop();
    assert!(found.is_empty(), "schema violations: {found:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn descriptors_sent_along_to_the_local_socket_are_closed_not_kept() {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::os::fd::AsRawFd;
    let stack = Stack::start().await.expect("stack");
    let gateway = stack.service_pid("gateway").expect("gateway");
    let open_fds = || {
        std::fs::read_dir(format!("/proc/{gateway}/fd"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let before = open_fds();
    let socket = stack.state.path().join("run/fleet/mcp.sock");
    let files: Vec<std::fs::File> = (0..16)
        .map(|_| std::fs::File::open("/dev/null").expect("open"))
        .collect();
    let fds: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
    let request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    for _ in 0..40 {
        let s = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
        let iov = [std::io::IoSlice::new(request)];
        sendmsg::<()>(
            s.as_raw_fd(),
            &iov,
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .expect("send descriptors");
        let mut answer = Vec::new();
        let _ = std::io::Read::read_to_end(&mut &s, &mut answer);
    }
    // The gateway closes each connection on its own time: wait for it.
    eventually(Duration::from_secs(10), async || {
        (open_fds() <= before + 4).then_some(())
    })
    .await;
    let after = open_fds();
    assert!(
        after <= before + 4,
        "the gateway kept {} of the 640 descriptors sent",
        after.saturating_sub(before)
    );
}

/// One Host and Origin check stands in front of every route, on every
/// listener: a request naming another host (a rebound name) or sent from
/// another site's page is refused before admission, on the seat, operator,
/// MCP and health routes alike. From inside a pane, where the kernel proof
/// passes, the same request with the gateway's own name goes through.
#[tokio::test(flavor = "multi_thread")]
async fn the_host_and_origin_check_stands_in_front_of_every_route() {
    let (stack, _tmux, _workspace, lead) = seat_stack().await;
    let discovery: clankie_types::discovery::GatewayDiscovery = serde_json::from_slice(
        &std::fs::read(stack.state.path().join("run/fleet/gateway.json")).expect("discovery"),
    )
    .expect("discovery json");
    let tcp_base = |url: &str| {
        url.trim_end_matches("/mcp")
            .trim_end_matches('/')
            .to_string()
    };
    let bearer = tcp_base(&stack.url);
    let local_tcp = tcp_base(&discovery.local_mcp);
    let routes = [
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("POST", "/mcp"),
        ("GET", "/v1/operator/projects"),
        ("POST", "/v1/operator/projects/remove-workspace"),
        ("GET", "/v1/tracker/request-budget"),
        ("GET", "/v1/fleet/seats/%251/mailbox?wait=0"),
        ("POST", "/v1/fleet/seats/%251/mailbox/ack"),
        ("POST", "/v1/fleet/seats/%251/peer-messages"),
        ("POST", "/v1/fleet/seats/%251/review-verdicts"),
    ];
    let bad: [(&str, &str, &str); 4] = [
        ("Host", "evil.example:7755", "host_not_allowed"),
        ("Host", "127.0.0.1.evil.example", "host_not_allowed"),
        ("Origin", "https://evil.example", "origin_not_allowed"),
        ("Origin", "null", "origin_not_allowed"),
    ];
    let mut tried = 0;
    for (method, path) in routes {
        for (name, value, code) in bad {
            let answers = [
                clankie_tests::http(&format!("{bearer}{path}"), method, &[(name, value)], "{}"),
                clankie_tests::http(
                    &format!("{local_tcp}{path}"),
                    method,
                    &[(name, value)],
                    "{}",
                ),
                clankie_tests::unix_http(&discovery.unix, method, path, &[(name, value)], "{}"),
            ];
            for (status, body) in answers {
                assert_eq!(status, 403, "{method} {path} {name}: {value}: {body}");
                assert_eq!(
                    json_of(&body)["error"]["code"],
                    code,
                    "{method} {path} {name}: {value}"
                );
                tried += 1;
            }
        }
    }
    assert_eq!(tried, 120);
    // Not a blanket refusal: the gateway's own names pass.
    let (status, _) = clankie_tests::http(&format!("{bearer}/healthz"), "GET", &[], "");
    assert_eq!(status, 200);
    let (status, _) = clankie_tests::unix_http(
        &discovery.unix,
        "GET",
        "/healthz",
        &[("Origin", "http://localhost:7755")],
        "",
    );
    assert_eq!(status, 200);

    // A page in a pane (the kernel proof passes there) cannot act as the
    // seat through another name or from another site.
    let dir = tempfile::tempdir().expect("dir");
    let a = Seat::hire(&stack, dir.path(), "a", &lead).await;
    let mailbox = "/v1/fleet/seats/{pane}/mailbox?wait=0";
    let from_pane = |headers: Value| {
        let a = &a;
        async move {
            a.run(json!({ "http": ["GET", mailbox, null], "headers": headers }))
                .await
        }
    };
    let rebound = from_pane(json!({ "Host": "evil.example" })).await;
    assert_eq!(rebound["status"], 403, "{rebound}");
    assert_eq!(rebound["body"]["error"]["code"], "host_not_allowed");
    let cross = from_pane(json!({ "Origin": "https://evil.example" })).await;
    assert_eq!(cross["status"], 403, "{cross}");
    assert_eq!(cross["body"]["error"]["code"], "origin_not_allowed");
    let own = from_pane(json!({})).await;
    assert_eq!(own["status"], 200, "{own}");
    // Each refusal was logged with its reason, never the name it carried.
    let text: String = logs(&stack).into_iter().map(|(_, t)| t).collect();
    assert!(text.contains("host_not_allowed"));
    assert!(
        !text.contains("evil.example"),
        "the refused name is not logged"
    );
}

/// Nothing in the state folder is readable by another account: logs, the
/// tracker's database, journals, receipts, sockets, whatever the umask the
/// owner started the stack with; and a folder an older release left
/// readable is made private at start.
#[tokio::test(flavor = "multi_thread")]
async fn every_state_log_and_database_file_is_private_to_the_owner() {
    use std::os::unix::fs::PermissionsExt as _;
    let state = tempfile::Builder::new()
        .prefix("ck")
        .tempdir_in("/tmp")
        .expect("state");
    std::fs::create_dir_all(state.path().join("logs")).expect("mkdir");
    let old = state.path().join("logs/old.log");
    std::fs::write(&old, "an older release's log").expect("write");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    // A loose umask, as a login shell often has.
    let before = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let stack = Stack::start_in(state, StackOptions::default())
        .await
        .expect("stack");
    nix::sys::stat::umask(before);
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    let client = stack.client(&token).await.expect("client");
    clankie_tests::wait_tool(&client, "time_get_current_time").await;
    let answer = clankie_tests::utc_now(&client).await.expect("call");
    assert_eq!(answer["outcome"], "ok", "{answer}");
    let _workspace = stack.add_project("alpha", &[]);
    stack.add_lead("Lead");
    let mut seen = 0;
    let mut stack_dirs = vec![stack.state.path().to_path_buf()];
    while let Some(d) = stack_dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read").flatten() {
            let meta = e.path().symlink_metadata().expect("meta");
            let mode = meta.permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "{} is {mode:o}", e.path().display());
            seen += 1;
            if meta.is_dir() {
                stack_dirs.push(e.path());
            }
        }
    }
    assert!(seen >= 20, "the stack wrote its files: {seen}");
    for file in ["tracker/tracker.db", "logs/mailbox.log", "logs/old.log"] {
        assert!(stack.state.path().join(file).exists(), "{file}");
    }
}

/// The process whose command line holds `needle` (and is not a shell
/// running it).
fn process_with(needle: &str) -> Option<(i32, i32)> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let argv = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let argv = String::from_utf8_lossy(&argv).replace('\0', " ");
        if argv.contains(needle) && !argv.starts_with("sh ") {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let ppid = stat
                .rsplit(") ")
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            return Some((pid, ppid));
        }
    }
    None
}

/// A seat's long poll is not rechecked at the door: the mailbox's seat
/// observation does that as the poll starts. A catalog change can end the
/// wait before that observation answered (here the mailbox is stopped, so
/// it never does), and then the answer needs a recheck of its own. A poller
/// that left its pane before polling gets a refusal, never the listing.
#[tokio::test(flavor = "multi_thread")]
async fn a_poll_from_a_process_that_left_its_pane_gets_no_listing_when_the_catalog_changes() {
    let stack = Stack::start().await.expect("stack");
    let _tmux = stack.link_tmux("work");
    let _workspace = stack.add_project("alpha", &[]);
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("poll.json");
    let script = repo_root().join("tests/clients/stale_poll.py");
    // `; :` keeps sh as the pane's agent, with the poller its child.
    let line = format!(
        "{} {} {}; :",
        python().display(),
        script.display(),
        out.display()
    );
    stack.clankie_ok(&["hire", "--project", "alpha", "--", "sh", "-c", &line]);
    let side = |ext: &str| std::path::PathBuf::from(format!("{}.{ext}", out.display()));
    let first = clankie_tests::wait_json(&side("first"), Duration::from_secs(60)).await;
    assert!(
        first.is_some(),
        "the first poll was not answered: {:?}",
        std::fs::read_to_string(&out)
    );
    let needle = format!("stale_poll.py {}", out.display());
    let (poller, agent) = process_with(&needle).expect("the poller runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the pane's agent");
    let moved = clankie_tests::eventually(Duration::from_secs(20), async || {
        process_with(&needle).filter(|(p, parent)| *p == poller && *parent != agent)
    })
    .await;
    assert!(moved.is_some(), "the poller was not reparented");
    // The mailbox cannot observe the seat while it is stopped: only the
    // gateway's own check stands between the change and the answer.
    stack.signal("mailbox", nix::sys::signal::Signal::SIGSTOP);
    std::fs::write(side("go"), "").expect("go");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let changed = stack.clankie(&["fleet", "set", "--tools", "off"]);
    let answer = clankie_tests::wait_json(&out, Duration::from_secs(60)).await;
    stack.signal("mailbox", nix::sys::signal::Signal::SIGCONT);
    assert!(changed.status.success(), "{changed:?}");
    let answer = answer.expect("the poll answered");
    assert_ne!(answer["status"], 200, "{answer}");
    assert_eq!(answer["listing"], false, "{answer}");
}
