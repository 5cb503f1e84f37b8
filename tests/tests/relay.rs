//! Remote machines (the relay links of a fleet), on a real stack through
//! the owner's CLI: a machine is registered with a one-time enrolment
//! secret that is shown once and kept only as its hash, and the machines
//! file takes the fail-safe path when it cannot be read. A machine then
//! enrols over TLS, pinning the main stack's certificate and binding its
//! own key.

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Output, Stdio};

use clankie_tests::seat::json_of;
use clankie_tests::{Stack, StackOptions};
use serde_json::Value;

fn machines(stack: &Stack) -> Value {
    json_of(&stack.clankie_ok(&["fleet", "machine", "list", "--json"]))
}

/// `clankie doctor --json` (it exits 1 when something is unhealthy).
fn doctor(stack: &Stack) -> Value {
    json_of(&String::from_utf8_lossy(
        &stack.clankie(&["doctor", "--json"]).stdout,
    ))
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_is_registered_with_a_secret_shown_once_and_kept_only_as_its_hash() {
    let stack = Stack::start().await.expect("stack");
    let before = clankie_runtime::now_ms();
    let secret = stack
        .clankie_ok(&["fleet", "machine", "add", "pc", "--expires-in", "2h"])
        .trim()
        .to_string();
    assert!(
        secret.starts_with("clkm_") && secret.len() == 5 + 64,
        "{secret}"
    );

    // Kept only as its hash, in a file no other user can read.
    let path = stack.state.path().join("admission/machines.json");
    let kept = std::fs::read_to_string(&path).expect("machines file");
    assert!(!kept.contains(&secret[5..]), "{kept}");
    assert!(
        kept.contains(&clankie_runtime::owner::token_hash(&secret)),
        "{kept}"
    );
    let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");

    // Listed, waiting to enrol, and never with its secret.
    let listed = machines(&stack);
    assert!(!listed.to_string().contains(&secret[5..]), "{listed}");
    let pc = &listed["machines"][0];
    assert_eq!(pc["name"], "pc", "{listed}");
    assert_eq!(pc["fleet"], "local", "{listed}");
    assert_eq!(pc["enrolled"], false, "{listed}");
    let expires = pc["enrolmentExpiresAtMs"].as_i64().expect("expiry");
    let two_hours = 2 * 60 * 60 * 1000;
    assert!(
        expires >= before + two_hours && expires <= clankie_runtime::now_ms() + two_hours,
        "{listed}"
    );
    let plain = stack.clankie_ok(&["fleet", "machine", "list"]);
    assert!(plain.contains("pc fleet=local waiting to enrol"), "{plain}");

    // The same name again is refused, and the first registration stands.
    let again = stack.clankie(&["fleet", "machine", "add", "pc"]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("machine_exists"),
        "{}",
        stderr(&again)
    );
    assert_eq!(std::fs::read_to_string(&path).expect("kept"), kept);
    // A name that is not one is refused.
    for bad in ["PC", "pc/1", "pc machine"] {
        let out = stack.clankie(&["fleet", "machine", "add", bad]);
        assert!(!out.status.success(), "{bad}");
        assert!(
            stderr(&out).contains("invalid_argument"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(
        machines(&stack)["machines"].as_array().map(Vec::len),
        Some(1)
    );

    // A second machine in another fleet; then both removed, by name.
    stack.clankie_ok(&["fleet", "machine", "add", "laptop", "--fleet", "blue"]);
    let names: Vec<String> = machines(&stack)["machines"]
        .as_array()
        .expect("machines")
        .iter()
        .map(|m| format!("{}@{}", m["name"], m["fleet"]).replace('"', ""))
        .collect();
    assert_eq!(names, ["laptop@blue", "pc@local"]);
    stack.clankie_ok(&["fleet", "machine", "remove", "pc"]);
    stack.clankie_ok(&["fleet", "machine", "remove", "laptop"]);
    assert_eq!(machines(&stack)["machines"], serde_json::json!([]));
    let gone = stack.clankie(&["fleet", "machine", "remove", "pc"]);
    assert_eq!(gone.status.code(), Some(4), "{}", stderr(&gone));
    assert!(
        stderr(&gone).contains("machine_not_found"),
        "{}",
        stderr(&gone)
    );
    // The secret never reached a log.
    for entry in std::fs::read_dir(stack.state.path().join("logs")).expect("logs") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).unwrap_or_default();
        assert!(!text.contains(&secret[5..]), "a log holds the secret");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_machines_file_is_reported_kept_and_never_overwritten() {
    let mut stack = Stack::start().await.expect("stack");
    stack.clankie_ok(&["fleet", "machine", "add", "pc"]);
    stack.stop();
    let path = stack.state.path().join("admission/machines.json");
    let damaged = b"{\"version\": 1, \"machines\": [ {\"name\": ".to_vec();
    std::fs::write(&path, &damaged).expect("damage");
    stack
        .restart(StackOptions::default())
        .await
        .expect("restart");

    // Listed as unreadable, holding no machine.
    let out = stack.clankie(&["fleet", "machine", "list", "--json"]);
    assert!(!out.status.success());
    let listed = json_of(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(listed["unreadable"], true, "{listed}");
    assert_eq!(listed["machines"], serde_json::json!([]), "{listed}");
    // No change is saved over it.
    for args in [
        &["fleet", "machine", "add", "laptop"][..],
        &["fleet", "machine", "remove", "pc"][..],
    ] {
        let out = stack.clankie(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr(&out).contains("fleet_admission_unavailable"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read(&path).expect("kept"), damaged);
    // The owner hears it from the fleet status.
    let status = stack.clankie(&["fleet", "status", "--json"]);
    let status = json_of(&String::from_utf8_lossy(&status.stdout));
    assert!(
        status["problems"].to_string().contains("machines.json"),
        "{status}"
    );
}

/// A main stack that takes remote machines: its relay listener on a free
/// loopback port.
fn relay_options() -> StackOptions {
    relay_at(0)
}

/// A main stack whose relay listener is on `port` (kept across restarts).
fn relay_at(port: u16) -> StackOptions {
    StackOptions {
        env: vec![("CLANKIE_RELAY_ADDR".into(), format!("127.0.0.1:{port}"))],
        ..Default::default()
    }
}

/// Where the main stack's relay listens and the fingerprint it shows, from
/// its discovery file.
fn relay_of(stack: &Stack) -> (String, String) {
    let d = json_of(
        &std::fs::read_to_string(stack.state.path().join("run/fleet/gateway.json"))
            .expect("discovery"),
    );
    (
        d["relay"]["addr"].as_str().expect("relay addr").to_string(),
        d["relay"]["certSha256"]
            .as_str()
            .expect("relay pin")
            .to_string(),
    )
}

/// `clankie fleet machine enrol` run on a "remote machine" (its own state
/// folder), with the secret on standard input.
fn enrol(remote: &std::path::Path, name: &str, main: &str, pin: &str, secret: &str) -> Output {
    enrol_in(None, remote, name, main, pin, secret)
}

/// [`enrol`], run in network namespace `ns` when one is named.
fn enrol_in(
    ns: Option<&str>,
    remote: &std::path::Path,
    name: &str,
    main: &str,
    pin: &str,
    secret: &str,
) -> Output {
    use std::io::Write as _;
    let clankie = clankie_tests::bin_dir().join("clankie");
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&clankie);
            c
        }
        None => Command::new(&clankie),
    };
    let mut child = cmd
        .args([
            "fleet", "machine", "enrol", name, "--main", main, "--pin", pin,
        ])
        .env("CLANKIE_STATE", remote)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("enrol");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{secret}").expect("secret");
    drop(stdin);
    child.wait_with_output().expect("enrolled")
}

/// The fingerprint of the certificate a stack keeps in `relay/identity.json`.
fn identity_of(state: &std::path::Path) -> String {
    use sha2::Digest as _;
    let id =
        json_of(&std::fs::read_to_string(state.join("relay/identity.json")).expect("identity"));
    let der = hex::decode(id["certDer"].as_str().expect("cert")).expect("hex");
    hex::encode(sha2::Sha256::digest(der))
}

/// A machine enrols once, over TLS, with the main stack's certificate
/// pinned: a wrong pin is refused before the secret leaves the machine (it
/// stays unspent), the right one spends it and binds the machine's own key,
/// and the same secret from anywhere else, or for a name never registered,
/// is refused with one reason. The main stack keeps its certificate across
/// a restart, so the pin holds.
#[tokio::test(flavor = "multi_thread")]
async fn a_machine_enrols_once_over_the_pinned_certificate_and_its_secret_is_spent() {
    let mut main = Stack::start_with(relay_options()).await.expect("main");
    let added = main.clankie(&["fleet", "machine", "add", "pc"]);
    assert!(added.status.success(), "{}", stderr(&added));
    let secret = String::from_utf8_lossy(&added.stdout).trim().to_string();
    let (addr, pin) = relay_of(&main);
    assert!(
        stderr(&added).contains(&format!("--pin {pin}")),
        "the owner is told the pin: {}",
        stderr(&added)
    );
    let remote = tempfile::tempdir().expect("remote");

    // A wrong certificate: refused, nothing sent, the secret still unspent.
    let wrong = "0".repeat(64);
    let out = enrol(remote.path(), "pc", &addr, &wrong, &secret);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("relay_certificate_mismatch"),
        "{}",
        stderr(&out)
    );
    assert_eq!(machines(&main)["machines"][0]["enrolled"], false);
    assert!(!remote.path().join("relay/link.json").exists());

    // The pinned one: enrolled, the machine's own key bound.
    let out = enrol(remote.path(), "pc", &addr, &pin, &secret);
    assert!(out.status.success(), "{}", stderr(&out));
    let pc = machines(&main)["machines"][0].clone();
    assert_eq!(pc["enrolled"], true, "{pc}");
    assert_eq!(pc["keySha256"], identity_of(remote.path()), "{pc}");
    let link =
        json_of(&std::fs::read_to_string(remote.path().join("relay/link.json")).expect("link"));
    assert_eq!(
        (&link["machine"], &link["fleet"], &link["pin"]),
        (
            &Value::from("pc"),
            &Value::from("local"),
            &Value::from(pin.clone())
        ),
        "{link}"
    );
    // `up --relay-to … --machine …` starts only as what it enrolled as.
    let wrong = Command::new(clankie_tests::bin_dir().join("clankie"))
        .args(["up", "--relay-to", &addr, "--machine", "mac"])
        .env("CLANKIE_STATE", remote.path())
        .stdin(Stdio::null())
        .output()
        .expect("up");
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(
        stderr(&wrong).contains("enrolled as pc"),
        "{}",
        stderr(&wrong)
    );
    for file in ["relay/identity.json", "relay/link.json"] {
        let mode = std::fs::metadata(remote.path().join(file))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{file} {mode:o}");
    }

    // The secret again, from another machine's key or for another name:
    // one refusal, and the bound key stands.
    let elsewhere = tempfile::tempdir().expect("elsewhere");
    main.clankie_ok(&["fleet", "machine", "add", "mac"]);
    for name in ["pc", "mac", "nobody"] {
        let out = enrol(elsewhere.path(), name, &addr, &pin, &secret);
        assert!(!out.status.success(), "{name}");
        assert!(
            stderr(&out).contains("machine_enrolment_refused"),
            "{name}: {}",
            stderr(&out)
        );
    }
    assert_eq!(machines(&main)["machines"][1]["keySha256"], pc["keySha256"]);
    assert_eq!(machines(&main)["machines"][0]["enrolled"], false, "mac");

    // A stack that copied the link file but never enrolled its own key is
    // refused its link: a name and a pin are not a machine.
    let mut stranger = Stack::start().await.expect("stranger");
    std::fs::create_dir_all(stranger.state.path().join("relay")).expect("relay dir");
    std::fs::copy(
        remote.path().join("relay/link.json"),
        stranger.state.path().join("relay/link.json"),
    )
    .expect("copied link");
    stranger
        .restart(StackOptions::default())
        .await
        .expect("stranger");
    let refused = clankie_tests::eventually(std::time::Duration::from_secs(10), async || {
        std::fs::read_to_string(stranger.state.path().join("logs/gateway.log"))
            .ok()?
            .contains("relay.link.refused reason=machine_not_found")
            .then_some(())
    })
    .await;
    assert!(
        refused.is_some(),
        "{}",
        stranger.log_tails(&["gateway"], 20)
    );
    let pc = &machines(&main)["machines"][1];
    assert_eq!(pc["link"]["up"], false, "{pc}");

    // Restarted, the main stack shows the same certificate.
    main.restart(relay_options()).await.expect("restart");
    let (_, again) = relay_of(&main);
    assert_eq!(again, pin);
}

/// The link of `main`'s only machine, as `fleet machine list` shows it.
fn link_of(main: &Stack) -> Value {
    machines(main)["machines"][0]["link"].clone()
}

/// Waits until the main stack shows the machine's link `up` (and, when up,
/// opened after `after` ms).
async fn link_becomes(main: &Stack, up: bool, after: i64) -> Value {
    clankie_tests::eventually(std::time::Duration::from_secs(20), async || {
        let link = link_of(main);
        let since = link["sinceMs"].as_i64().unwrap_or(0);
        (link["up"] == up && (!up || since > after)).then_some(link)
    })
    .await
    .unwrap_or_else(|| panic!("the link never went {up}: {}", link_of(main)))
}

/// An enrolled machine's stack keeps one link to the main stack: up once it
/// starts, down when its gateway dies or goes silent (a cut cable sends no
/// reset), up again by itself after each, and ended at once, with the
/// reason, when the owner removes the machine.
#[tokio::test(flavor = "multi_thread")]
async fn an_enrolled_machine_keeps_one_link_that_comes_back_and_ends_when_removed() {
    let main = Stack::start_with(relay_options()).await.expect("main");
    let secret = main
        .clankie_ok(&["fleet", "machine", "add", "pc"])
        .trim()
        .to_string();
    let (addr, pin) = relay_of(&main);
    let mut remote = Stack::start().await.expect("remote");
    let out = enrol(remote.state.path(), "pc", &addr, &pin, &secret);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(link_of(&main)["up"], false, "enrolled, not linked yet");
    // Its gateway takes the link up when it starts.
    remote
        .restart(StackOptions::default())
        .await
        .expect("remote");
    let first = link_becomes(&main, true, 0).await;
    assert!(first["rttMs"].is_u64(), "{first}");
    assert_eq!(first["inFlight"], 0, "{first}");
    // Fleet status shows it too.
    let status = json_of(&main.clankie_ok(&["fleet", "status", "--json"]));
    assert_eq!(status["machines"][0]["link"]["up"], true, "{status}");
    let plain = main.clankie_ok(&["fleet", "status"]);
    assert!(
        plain.contains("machine pc fleet=local link up for"),
        "{plain}"
    );
    let since = first["sinceMs"].as_i64().expect("since");
    // The machine's own doctor says its link is up.
    let up = doctor(&remote)["uplink"].clone();
    assert_eq!(
        (&up["state"], &up["healthy"]),
        (&Value::from("up"), &Value::from(true)),
        "{up}"
    );

    // Killed: the main stack hears the reset, and the restarted gateway
    // links again.
    let gateway = remote.service_pid("gateway").expect("gateway");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gateway),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill");
    let again = link_becomes(&main, true, since).await;
    let since = again["sinceMs"].as_i64().expect("since");

    // Silent: taken for gone within the silence window, back once it
    // speaks.
    let gateway = remote.service_pid("gateway").expect("gateway");
    clankie_tests::pause(gateway);
    link_becomes(&main, false, 0).await;
    // The main stack's doctor names the machine whose link is down.
    let seen = doctor(&main);
    assert_eq!(seen["healthy"], false, "{seen}");
    let pc = &seen["machines"][0];
    assert_eq!(
        (&pc["name"], &pc["healthy"]),
        (&Value::from("pc"), &Value::from(false)),
        "{pc}"
    );
    assert!(
        pc["explain"]
            .as_str()
            .unwrap_or("")
            .contains("link is down"),
        "{pc}"
    );
    clankie_tests::resume(gateway);
    link_becomes(&main, true, since).await;

    // Removed: the link ends now, and the machine is told why.
    main.clankie_ok(&["fleet", "machine", "remove", "pc"]);
    let told = clankie_tests::eventually(std::time::Duration::from_secs(10), async || {
        std::fs::read_to_string(remote.state.path().join("logs/gateway.log"))
            .ok()?
            .contains("machine_not_found")
            .then_some(())
    })
    .await;
    assert!(
        told.is_some(),
        "the machine heard it was removed:\n{}",
        remote.log_tails(&["gateway"], 20)
    );
    assert_eq!(machines(&main)["machines"], serde_json::json!([]));
    // The machine's doctor says why, and what to do.
    let told = clankie_tests::eventually(std::time::Duration::from_secs(10), async || {
        let u = doctor(&remote)["uplink"].clone();
        (u["reason"] == "machine_not_found").then_some(u)
    })
    .await
    .expect("the machine's doctor explains");
    assert_eq!(told["healthy"], false, "{told}");
    assert!(
        told["explain"]
            .as_str()
            .unwrap_or("")
            .contains("enrol again"),
        "{told}"
    );
    let main_log =
        std::fs::read_to_string(main.state.path().join("logs/gateway.log")).expect("main log");
    assert!(main_log.contains("relay.link.down"), "{main_log}");
}

/// A remote machine's stack, enrolled as `pc` with `main` and started with
/// its link: tmux session `work` linked, project `alpha`, a lead.
async fn remote_machine(
    main: &Stack,
) -> (Stack, clankie_tests::TmuxServer, tempfile::TempDir, String) {
    remote_machine_in(main, None, None, Vec::new()).await
}

/// [`remote_machine`] in network namespace `ns`, reaching the main stack's
/// relay at `main_at` (default: where its discovery file says).
async fn remote_machine_in(
    main: &Stack,
    ns: Option<&str>,
    main_at: Option<String>,
    env: Vec<(String, String)>,
) -> (Stack, clankie_tests::TmuxServer, tempfile::TempDir, String) {
    let secret = main
        .clankie_ok(&["fleet", "machine", "add", "pc"])
        .trim()
        .to_string();
    let (addr, pin) = relay_of(main);
    let addr = main_at.unwrap_or(addr);
    let options = || StackOptions {
        netns: ns.map(str::to_string),
        env: env.clone(),
        ..Default::default()
    };
    let mut remote = Stack::start_with(options()).await.expect("remote");
    let tmux = clankie_tests::TmuxServer::start("work");
    let socket = tmux.socket.display().to_string();
    remote.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    let workspace = tempfile::tempdir().expect("workspace");
    let ws = workspace.path().display().to_string();
    remote.clankie_ok(&["project", "add", "alpha", "--workspace", &ws]);
    let lead = remote.add_lead("Lead");
    let out = enrol_in(ns, remote.state.path(), "pc", &addr, &pin, &secret);
    assert!(out.status.success(), "{}", stderr(&out));
    remote.restart(options()).await.expect("remote");
    link_becomes(main, true, 0).await;
    (remote, tmux, workspace, lead)
}

/// A connected call from `seat`, asked again while it is refused with a
/// retryable reason (a main stack's catalog still loading, a link coming
/// back): nothing was forwarded for those.
async fn answered(seat: &clankie_tests::seat::Seat, args: Value) -> Value {
    clankie_tests::eventually(std::time::Duration::from_secs(20), async || {
        let r = seat.call("clankie_call", args.clone()).await;
        (r["result"]["error"]["retryable"] != true).then_some(r)
    })
    .await
    .expect("answered without a retryable refusal")
}

fn time_now() -> Value {
    serde_json::json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}})
}

/// A bridge in a remote machine's pane calls a tool connected on the main
/// stack, with no token: its own stack proved the pane, the call crossed the
/// link, and the main stack's audit names the machine and the pane. The
/// machine's own stack dispatched nothing. After the main stack restarts,
/// the link comes back by itself and calls go on; once the machine is
/// removed, calls are refused with the fixed reason and nothing crosses.
#[tokio::test(flavor = "multi_thread")]
async fn a_remote_panes_call_crosses_the_link_and_is_audited_with_machine_and_pane() {
    let port = clankie_tests::free_port();
    let mut main = Stack::start_with(relay_at(port)).await.expect("main");
    main.connect_stdio("time", &["mcp-server-time"], &[]);
    let (remote, _tmux, _workspace, lead) = remote_machine(&main).await;
    let dir = tempfile::tempdir().expect("dir");
    let seat = clankie_tests::seat::Seat::hire(&remote, dir.path(), "w", &lead).await;
    let pane = seat.hire["paneId"].as_str().expect("pane").to_string();

    let r = answered(&seat, time_now()).await;
    assert_eq!(r["result"]["outcome"], "ok", "{r}");
    let receipt = r["result"]["receiptId"]
        .as_str()
        .expect("receipt")
        .to_string();
    let audit = clankie_tests::file_lines(&main.state.path().join("audit/connected-calls.jsonl"));
    let principal = format!("fleet:local:machine:pc:pane:{pane}");
    assert!(
        audit
            .iter()
            .any(|l| l.contains(&principal) && l.contains(&receipt) && l.contains("\"dispatch\"")),
        "{principal} in {audit:?}"
    );
    assert!(
        clankie_tests::file_lines(&remote.state.path().join("audit/connected-calls.jsonl"))
            .is_empty(),
        "the machine's own stack dispatched nothing"
    );
    // The owner's metrics count the link and the relayed call.
    let owner = std::fs::read_to_string(main.paths().owner_credential()).expect("owner");
    let auth = format!("Bearer {}", owner.trim());
    let counted = clankie_tests::eventually(std::time::Duration::from_secs(10), async || {
        let (status, page) = clankie_tests::http(
            &format!("{}/metrics", main.url),
            "GET",
            &[("authorization", &auth)],
            "",
        );
        let has = |name: &str, label: &str, value: &str| {
            page.lines().any(|l| {
                l.starts_with(name) && l.contains(label) && l.ends_with(&format!(" {value}"))
            })
        };
        (status == 200
            && has("clankie_relay_links_up", "", "1")
            && has("clankie_relay_requests_total", "result=\"answered\"", "1"))
        .then_some(())
    })
    .await;
    assert!(counted.is_some(), "the link and the call are counted");
    // The receipt reads back across the link.
    let again = seat
        .call("clankie_call", serde_json::json!({ "receiptId": receipt }))
        .await;
    assert_eq!(again["result"]["fromReceipt"], true, "{again}");

    // The main stack restarts: the link comes back by itself.
    let since = link_of(&main)["sinceMs"].as_i64().expect("since");
    main.restart(relay_at(port)).await.expect("restart");
    link_becomes(&main, true, since).await;
    let r = answered(&seat, time_now()).await;
    assert_eq!(r["result"]["outcome"], "ok", "{r}");

    // Removed: refused with the fixed reason, and nothing crosses.
    main.clankie_ok(&["fleet", "machine", "remove", "pc"]);
    let dispatched = |s: &Stack| {
        clankie_tests::file_lines(&s.state.path().join("audit/connected-calls.jsonl"))
            .iter()
            .filter(|l| l.contains("\"dispatch\""))
            .count()
    };
    let before = dispatched(&main);
    let refused = clankie_tests::eventually(std::time::Duration::from_secs(10), async || {
        let r = seat.call("clankie_call", time_now()).await;
        (r["result"]["error"]["code"] == "relay_link_down").then_some(r)
    })
    .await;
    assert!(refused.is_some(), "{}", remote.log_tails(&["gateway"], 20));
    assert_eq!(dispatched(&main), before, "nothing crossed");
}

/// Across two network namespaces joined by a veth pair: a remote pane's
/// call crosses the real link; the link cut, the machine's calls are
/// refused with the fixed reason and nothing reaches the main stack; the
/// link restored, calls go through again by themselves.
#[tokio::test(flavor = "multi_thread")]
async fn across_namespaces_a_cut_link_refuses_calls_and_a_restored_one_serves_them() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: network namespaces need root");
        return;
    }
    let net = clankie_tests::netns::NetPair::new();
    let port = clankie_tests::free_port();
    let main_at = format!("{}:{port}", net.main_addr);
    let main = Stack::start_with(StackOptions {
        env: vec![("CLANKIE_RELAY_ADDR".into(), main_at.clone())],
        netns: Some(net.main_ns.clone()),
        ..Default::default()
    })
    .await
    .expect("main");
    main.connect_stdio("time", &["mcp-server-time"], &[]);
    let (remote, _tmux, _workspace, lead) =
        remote_machine_in(&main, Some(&net.remote_ns), Some(main_at), Vec::new()).await;
    let dir = tempfile::tempdir().expect("dir");
    let seat = clankie_tests::seat::Seat::hire(&remote, dir.path(), "w", &lead).await;
    let r = answered(&seat, time_now()).await;
    assert_eq!(r["result"]["outcome"], "ok", "{r}");
    let dispatched = || {
        clankie_tests::file_lines(&main.state.path().join("audit/connected-calls.jsonl"))
            .iter()
            .filter(|l| l.contains("\"dispatch\"") && l.contains("machine:pc"))
            .count()
    };
    let before = dispatched();

    net.cut();
    let refused = clankie_tests::eventually(std::time::Duration::from_secs(10), async || {
        let r = seat.call("clankie_call", time_now()).await;
        (r["result"]["error"]["code"] == "relay_link_down").then_some(r)
    })
    .await;
    assert!(refused.is_some(), "{}", remote.log_tails(&["gateway"], 20));
    link_becomes(&main, false, 0).await;
    assert_eq!(dispatched(), before, "nothing crossed the cut link");

    net.restore();
    let r = answered(&seat, time_now()).await;
    assert_eq!(r["result"]["outcome"], "ok", "{r}");
    assert_eq!(dispatched(), before + 1);
}

/// kill -9 of the machine's gateway while its pane's call runs on the main
/// stack: the pane's bridge answers under the receipt id it chose, the
/// link comes back by itself, and that id then reads the call's one
/// outcome across the link. The main stack dispatched it exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_cut_off_by_kill_9_of_the_machine_reconciles_by_its_receipt_and_ran_once() {
    let main = Stack::start_with(relay_options()).await.expect("main");
    main.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let (remote, _tmux, _workspace, lead) = remote_machine(&main).await;
    let dir = tempfile::tempdir().expect("dir");
    let seat = clankie_tests::seat::Seat::hire(&remote, dir.path(), "w", &lead).await;
    let long = serde_json::json!({
        "name": "everything_trigger-long-running-operation",
        "arguments": {"duration": 3, "steps": 3},
    });
    // The catalog may still be loading on the main stack.
    let warm = clankie_tests::eventually(std::time::Duration::from_secs(20), async || {
        let r = seat
            .call("clankie_tools", serde_json::json!({"query": "long"}))
            .await;
        r.to_string()
            .contains("trigger-long-running-operation")
            .then_some(())
    })
    .await;
    assert!(warm.is_some(), "the main stack's catalog reached the pane");
    let audit = main.state.path().join("audit/connected-calls.jsonl");
    let n = seat.send(serde_json::json!({ "tool": "clankie_call", "args": long }));
    let crossed = clankie_tests::eventually(std::time::Duration::from_secs(20), async || {
        clankie_tests::file_lines(&audit)
            .into_iter()
            .find(|l| l.contains("\"dispatch\"") && l.contains("machine:pc"))
    })
    .await
    .expect("the call crossed and was dispatched");
    let since = link_of(&main)["sinceMs"].as_i64().expect("since");
    remote.kill_restarted("gateway").await;
    let cut = seat.result(n).await;
    let receipt = cut["result"]["receiptId"]
        .as_str()
        .unwrap_or_else(|| panic!("answered under its receipt id: {cut}"))
        .to_string();
    assert!(crossed.contains(&receipt), "{crossed}");
    link_becomes(&main, true, since).await;
    let settled = clankie_tests::eventually(std::time::Duration::from_secs(20), async || {
        let r = seat
            .call("clankie_call", serde_json::json!({ "receiptId": receipt }))
            .await;
        (r["result"]["outcome"] == "ok").then_some(r)
    })
    .await
    .expect("the receipt settles ok");
    assert_eq!(settled["result"]["fromReceipt"], true, "{settled}");
    let dispatches = clankie_tests::file_lines(&audit)
        .iter()
        .filter(|l| l.contains("\"dispatch\"") && l.contains(&receipt))
        .count();
    assert_eq!(dispatches, 1, "dispatched exactly once");
}

/// One call from a remote pane is one trace: the machine's gateway hands
/// its trace context across the link, and the main stack's relayed request
/// and the services it calls hang from it.
#[tokio::test(flavor = "multi_thread")]
async fn a_remote_panes_call_is_one_trace_across_both_stacks() {
    let receiver = clankie_tests::otel::OtlpReceiver::start();
    let otlp = vec![
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
            receiver.grpc_endpoint(),
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "grpc".into()),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into()),
    ];
    let mut options = relay_options();
    options.env.extend(otlp.clone());
    let main = Stack::start_with(options).await.expect("main");
    main.connect_stdio("time", &["mcp-server-time"], &[]);
    let (remote, _tmux, _workspace, lead) = remote_machine_in(&main, None, None, otlp).await;
    let dir = tempfile::tempdir().expect("dir");
    let seat = clankie_tests::seat::Seat::hire(&remote, dir.path(), "w", &lead).await;
    let r = answered(&seat, time_now()).await;
    assert_eq!(r["result"]["outcome"], "ok", "{r}");

    let found = clankie_tests::eventually(std::time::Duration::from_secs(20), async || {
        let spans = receiver.spans();
        let relayed = spans.iter().find(|s| s.name == "relay.request")?;
        let trace: Vec<_> = spans.iter().filter(|s| s.trace == relayed.trace).collect();
        let ids: std::collections::BTreeSet<&str> = trace.iter().map(|s| s.span.as_str()).collect();
        let hangs = ids.contains(relayed.parent.as_str());
        let remote_side = trace.iter().any(|s| s.name.starts_with("mcp.tools_call"));
        let host = trace.iter().any(|s| s.service.contains("mcp-host"));
        (hangs && remote_side && host).then_some(trace.len())
    })
    .await;
    assert!(
        found.is_some(),
        "one trace from the remote gateway through the main stack: {:#?}",
        receiver.spans()
    );
}

/// Seats stay on their machine: a remote seat lists the seats of its own
/// machine and no other, messages one of them, and a send to a seat of the
/// main stack is refused as unknown in this fleet, with nothing delivered.
#[tokio::test(flavor = "multi_thread")]
async fn a_remote_seat_sees_and_messages_only_the_seats_of_its_own_machine() {
    let main = Stack::start_with(relay_options()).await.expect("main");
    let main_tmux = clankie_tests::TmuxServer::start("work");
    let socket = main_tmux.socket.display().to_string();
    main.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    let main_ws = tempfile::tempdir().expect("workspace");
    let ws = main_ws.path().display().to_string();
    main.clankie_ok(&["project", "add", "alpha", "--workspace", &ws]);
    let main_lead = main.add_lead("Main lead");
    let dir = tempfile::tempdir().expect("dir");
    let here = clankie_tests::seat::Seat::hire(&main, dir.path(), "m", &main_lead).await;
    let (remote, _tmux, _workspace, lead) = remote_machine(&main).await;
    let a = clankie_tests::seat::Seat::hire(&remote, dir.path(), "a", &lead).await;
    let b = clankie_tests::seat::Seat::hire(&remote, dir.path(), "b", &lead).await;

    let listed = a.call("list_fleet_seats", serde_json::json!({})).await;
    assert_eq!(listed["isError"], false, "{listed}");
    let seats: Vec<String> = listed["result"]["seats"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|s| s["seatId"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    assert!(seats.contains(&b.seat_id()), "{listed}");
    assert!(!seats.contains(&here.seat_id()), "{listed}");

    let across = a
        .call(
            "message_peer",
            serde_json::json!({ "seat": here.seat_id(), "text": "across", "receiptId": "x1" }),
        )
        .await;
    assert_eq!(
        across["result"]["error"]["code"], "recipient_unknown",
        "{across}"
    );
    let same = a
        .call(
            "message_peer",
            serde_json::json!({ "seat": b.seat_id(), "text": "same machine", "receiptId": "x2" }),
        )
        .await;
    assert_eq!(same["isError"], false, "{same}");
    b.wait_inbox("same machine").await;
    assert!(
        !here
            .inbox_contains("across", std::time::Duration::from_secs(2))
            .await,
        "nothing crossed"
    );
}

/// Any key gets through the handshake, so the listener bounds one address
/// before it knows who it is: with 8 sockets held silent, a ninth is closed
/// at once; once they go, a new one is taken again. A stop is not held up
/// by them.
#[tokio::test(flavor = "multi_thread")]
async fn the_relay_listener_bounds_what_one_address_holds_before_knowing_who_it_is() {
    use std::io::Read as _;
    let mut main = Stack::start_with(relay_options()).await.expect("main");
    let (addr, _) = relay_of(&main);
    let closed_at_once = |s: &mut std::net::TcpStream| {
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .expect("timeout");
        let mut b = [0u8; 1];
        // EOF or a reset: closed; a timeout: still held open.
        !matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
            || e.kind() == std::io::ErrorKind::TimedOut)
    };
    let held: Vec<std::net::TcpStream> = (0..8)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect"))
        .collect();
    let mut ninth = std::net::TcpStream::connect(&addr).expect("connect");
    assert!(closed_at_once(&mut ninth), "the ninth socket is closed");
    drop(held);
    // The listener gives a place back once it sees the socket close.
    let again = clankie_tests::eventually(std::time::Duration::from_secs(10), async || {
        let mut s = std::net::TcpStream::connect(&addr).ok()?;
        (!closed_at_once(&mut s)).then_some(s)
    })
    .await;
    assert!(again.is_some(), "a place is free again");
    let _held: Vec<std::net::TcpStream> = (0..7)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect"))
        .collect();
    assert!(main.stop(), "the stop is not held up by silent sockets");
}
