//! The standing fault suite: real binaries under faults, with the same
//! invariants checked after every one of them.
//!
//! - No receipt was dispatched twice (the upstream logs every start).
//! - None was lost: a call answered `ok` reconciles to `ok`.
//! - Every uncertain one reconciles: to its settled outcome, to a durable
//!   `uncertain`, or to `receipt_not_found` for a call that never ran.
//! - No answer was a false error (`internal`) or a false refusal of a call
//!   that ran.
//! - Every JSON state file still parses.
//!
//! Each scenario prints one summary line: faults injected, calls made,
//! receipts checked, violations (which must be 0). The schedule of the kill
//! scenario is seeded (`CLANKIE_FAULT_SEED`) and printed, so a failure can
//! be replayed. Floods and slow clients against the caps are in `bounds.rs`.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use clankie_tests::{Stack, StackOptions, call, file_lines, python, structured};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

/// A small seeded generator: the schedule must replay from its seed.
struct Rng(u64);

impl Rng {
    fn seeded() -> (Rng, u64) {
        let seed = std::env::var("CLANKIE_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed_f00d);
        (Rng(seed | 1), seed)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one scenario saw, and what broke.
#[derive(Default)]
struct Tally {
    faults: usize,
    calls: usize,
    receipts: usize,
    violations: Vec<String>,
}

impl Tally {
    fn violation(&mut self, v: String) {
        eprintln!("VIOLATION: {v}");
        self.violations.push(v);
    }
    fn finish(self, scenario: &str) {
        println!(
            "fault suite [{scenario}]: {} faults injected, {} calls made, {} receipts checked, {} violations",
            self.faults,
            self.calls,
            self.receipts,
            self.violations.len()
        );
        assert!(self.violations.is_empty(), "{:#?}", self.violations);
    }
}

fn ran(log: &Path, tag: &str) -> usize {
    file_lines(log).iter().filter(|l| l.as_str() == tag).count()
}

/// Every JSON state file under the state folder parses.
fn state_files_parse(root: &Path, tally: &mut Tally) {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_default();
        if serde_json::from_slice::<Value>(&bytes).is_err() {
            tally.violation(format!("{} does not parse", f.display()));
        }
    }
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// Connects, retrying while the stack restarts a service.
async fn connect(stack_url: &str, token: &str) -> Client {
    // Not `eventually`: this runs inside `tokio::spawn`, and a future that
    // awaits an `AsyncFnMut` probe is not `Send` for every lifetime (a
    // compiler limitation), so the retry is spelled out.
    for _ in 0..300 {
        if let Ok(c) = clankie_tests::mcp_client(stack_url, token).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the gateway never came back")
}

/// The first answer a call got: its structured body, or the transport error.
type Answers = Arc<Mutex<Vec<(String, String, Result<Value, String>)>>>;

/// Checks the invariants over every call made (id, tag, first answer).
async fn check_calls(client: &Client, log: &Path, answers: &Answers, tally: &mut Tally) {
    let answers = answers.lock().clone();
    for (id, tag, first) in answers {
        tally.receipts += 1;
        let runs = ran(log, &tag);
        if runs > 1 {
            tally.violation(format!("{id} dispatched {runs} times"));
        }
        if let Ok(b) = &first {
            if b["error"]["code"] == "internal" {
                tally.violation(format!("{id}: a false error {b}"));
            }
            if b.get("error").is_some() && runs > 0 {
                tally.violation(format!("{id} ran but was answered as refused: {b}"));
            }
            if b.get("outcome").is_some() && b["receiptId"] != id.as_str() {
                tally.violation(format!("{id}: the answer lost its receipt id: {b}"));
            }
        }
        let r = match call(client, "clankie_call", json!({"receiptId": id})).await {
            Ok(r) => structured(&r),
            Err(e) => {
                tally.violation(format!("{id}: reconcile failed: {e}"));
                continue;
            }
        };
        let outcome = r["outcome"].as_str().unwrap_or_default();
        if r["error"]["code"] == "receipt_not_found" {
            if runs > 0 {
                tally.violation(format!("{id} ran without a durable receipt"));
            }
            if matches!(&first, Ok(b) if b["outcome"] == "ok") {
                tally.violation(format!("{id} was answered ok and then lost"));
            }
            continue;
        }
        if !["ok", "error", "uncertain"].contains(&outcome) || r["fromReceipt"] != true {
            tally.violation(format!("{id}: reconcile is not an answer: {r}"));
            continue;
        }
        if matches!(&first, Ok(b) if b["outcome"] == "ok") && outcome != "ok" {
            tally.violation(format!("{id}: answered ok, now {outcome}"));
        }
        if outcome == "ok" && runs != 1 {
            tally.violation(format!("{id}: settled ok but ran {runs} times"));
        }
    }
}

const SERVICES: &[&str] = &[
    "mcp-host",
    "gateway",
    "admission",
    "tracker",
    "mailbox",
    "auto",
];

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_each_service_at_seeded_points_under_a_load_of_calls() {
    let (mut rng, seed) = Rng::seeded();
    println!("fault seed: {seed} (replay with CLANKIE_FAULT_SEED={seed})");
    let stack = Stack::start_with(StackOptions {
        request_budget_ms: Some(4_000),
        ..Default::default()
    })
    .await
    .expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    {
        let c = connect(&stack.mcp_url, &token).await;
        clankie_tests::wait_tool(&c, "edge_slow").await;
    }
    let answers: Answers = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicUsize::new(0));
    let mut load = Vec::new();
    for worker in 0..6 {
        let (url, token) = (stack.mcp_url.clone(), token.clone());
        let (answers, stop, made) = (answers.clone(), stop.clone(), made.clone());
        let seconds: Vec<f64> = (0..200)
            .map(|_| 0.05 + rng.below(30) as f64 / 100.0)
            .collect();
        load.push(tokio::spawn(async move {
            let mut client = connect(&url, &token).await;
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < seconds.len() {
                let id = format!("load-{worker}-{n:03}");
                let args = json!({"name": "edge_slow", "receiptId": id,
                    "arguments": {"seconds": seconds[n], "tag": id}});
                n += 1;
                made.fetch_add(1, Ordering::Relaxed);
                let first =
                    // Past the 4 s request budget, an answer is not coming:
                    // the client's stream died with the gateway.
                    match tokio::time::timeout(Duration::from_secs(6), call(&client, "clankie_call", args))
                        .await
                    {
                        Ok(Ok(r)) => Ok(structured(&r)),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err("no answer within 6 s".to_string()),
                    };
                let lost = first.is_err();
                if let Err(e) = &first {
                    println!("{id}: no answer ({e})");
                }
                answers
                    .lock()
                    .push((id.clone(), id, first));
                if lost {
                    // The gateway went away under the session: a new one.
                    client = connect(&url, &token).await;
                }
            }
        }));
    }
    let mut tally = Tally::default();
    // Two rounds: every service killed twice, in a seeded order.
    let mut order: Vec<&str> = [SERVICES, SERVICES].concat();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut killed: HashMap<&str, usize> = HashMap::new();
    for (k, service) in order.iter().enumerate() {
        let wait = 300 + rng.below(900);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        println!("fault {k}: kill -9 {service} after {wait} ms");
        stack.signal(service, Signal::SIGKILL);
        tally.faults += 1;
        let times = killed.entry(service).or_default();
        *times += 1;
        assert!(
            stack
                .wait_lines(
                    &format!("{service} restarted"),
                    *times,
                    Duration::from_secs(60)
                )
                .await,
            "{service} restarts: {:?}",
            stack.lines()
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.expect("load");
    }
    tally.calls = made.load(Ordering::Relaxed);
    let client = connect(&stack.mcp_url, &token).await;
    clankie_tests::wait_tool(&client, "edge_slow").await;
    check_calls(&client, &log, &answers, &mut tally).await;
    state_files_parse(stack.state.path(), &mut tally);
    tally.finish("kill -9 under load");
}

/// An instant `edge_slow` call under receipt `id` (tagged `id`).
async fn edge_call(client: &Client, id: &str) -> Result<Value, String> {
    call(
        client,
        "clankie_call",
        json!({"name": "edge_slow", "receiptId": id, "arguments": {"seconds": 0, "tag": id}}),
    )
    .await
    .map(|r| structured(&r))
    .map_err(|e| e.to_string())
}

/// A small tmpfs mounted on a new folder, unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::Builder::new()
            .prefix("ckfs")
            .tempdir_in("/tmp")
            .expect("dir");
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .expect("mount");
        assert!(
            out.status.success(),
            "this scenario needs root to mount a tmpfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.path())
            .status();
    }
}

/// Fills the filesystem at `dir` until a write fails; returns the filler.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write as _;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("filler");
    let block = vec![0u8; 64 << 10];
    while f.write_all(&block).is_ok() {}
    while f.write_all(&[0u8; 512]).is_ok() {}
    let _ = f.sync_all();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_dispatches_only_with_a_durable_receipt_and_leaves_no_false_uncertainty() {
    let fs = Tmpfs::mount("24m");
    let state = tempfile::Builder::new()
        .prefix("st")
        .tempdir_in(fs.0.path())
        .expect("state");
    let mut stack = Stack::start_in(state, StackOptions::default())
        .await
        .expect("stack");
    let log_dir = tempfile::tempdir().expect("edge log folder");
    let log = log_dir.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    let token = stack.token("alpha");
    let client = connect(&stack.mcp_url, &token).await;
    clankie_tests::wait_tool(&client, "edge_slow").await;
    let mut tally = Tally::default();
    let answers: Answers = Arc::default();

    let filler = fill(fs.0.path());
    tally.faults += 1;
    for n in 0..5 {
        let id = format!("full-disk-{n:02}");
        tally.calls += 1;
        let r = edge_call(&client, &id).await;
        // The receipt journal's space is allocated in advance, so a call
        // can still be made durable there; one that cannot (a checkpoint
        // is due) is refused before dispatch. Either way the restart's
        // reconcile below must agree with what ran.
        match &r {
            Ok(b)
                if b["error"]["code"] == "receipt_store_unavailable"
                    && b["receiptId"] == id.as_str() => {}
            Ok(b) if b["outcome"] == "ok" && b["receiptId"] == id.as_str() => {}
            other => tally.violation(format!("{id} on a full disk: {other:?}")),
        }
        answers.lock().push((id.clone(), id, r));
    }
    // A state write on the full disk fails with a clear error, and the old
    // file is untouched.
    let links = stack.state.path().join("admission/links.json");
    let before = std::fs::read(&links).expect("links");
    let out = stack.clankie(&["fleet", "token", "create", "beta"]);
    assert!(!out.status.success(), "a full disk refuses the write");
    assert_eq!(std::fs::read(&links).expect("links"), before);

    std::fs::remove_file(filler).expect("free");
    for n in 0..3 {
        let id = format!("after-{n:02}");
        tally.calls += 1;
        let r = edge_call(&client, &id).await;
        assert_eq!(
            r.as_ref().map(|b| b["outcome"].clone()).ok(),
            Some(json!("ok")),
            "{r:?}"
        );
        answers.lock().push((id.clone(), id, r));
    }
    drop(client);
    stack
        .restart(StackOptions::default())
        .await
        .expect("restart");
    tally.faults += 1;
    let client = connect(&stack.mcp_url, &token).await;
    clankie_tests::wait_tool(&client, "edge_slow").await;
    check_calls(&client, &log, &answers, &mut tally).await;
    // Readiness is polled (every 250 ms): the catalog that just loaded may
    // not be reported yet.
    let healthy = clankie_tests::eventually(Duration::from_secs(30), async || {
        let out = stack.clankie(&["doctor", "--json"]);
        out.status.success().then_some(out.stdout)
    })
    .await;
    let doctor: Value = serde_json::from_slice(
        &healthy.unwrap_or_else(|| stack.clankie_ok(&["doctor", "--json"]).into_bytes()),
    )
    .expect("doctor json");
    let uncertain = doctor["receipts"]["uncertain"].as_u64().unwrap_or(u64::MAX);
    if uncertain != 0 {
        tally.violation(format!(
            "{uncertain} receipts read uncertain after the disk filled: {doctor}"
        ));
    }
    state_files_parse(stack.state.path(), &mut tally);
    stack.stop();
    tally.finish("full disk");
}

/// The state files a used stack holds, and the service each belongs to.
const STATE_FILES: &[(&str, &str)] = &[
    ("admission/settings.json", "admission"),
    ("mcp-host/accounts.json", "mcp-host"),
    ("worker-grants/receipts/connected-calls.json", "mcp-host"),
    ("mailbox/state.json", "mailbox"),
    ("auto-rounds/cadence.json", "auto"),
    ("captain/autonomy.json", "auto"),
    ("tracker/tracker.db", "tracker"),
];

fn damaged(kind: &str, file: &str) -> Vec<u8> {
    match (kind, file.ends_with(".db")) {
        ("corrupt", _) => b"{\"half\": [1, 2".to_vec(),
        ("empty", _) => Vec::new(),
        ("foreign", false) => b"{\"something\": \"else\", \"version\": 99}".to_vec(),
        ("foreign", true) => {
            let dir = tempfile::tempdir().expect("dir");
            foreign_sqlite(&dir.path().join("other.db"))
        }
        _ => unreachable!(),
    }
}

/// The bytes of a SQLite database of some other program (made with
/// Python's sqlite3 module from the test venv).
fn foreign_sqlite(path: &Path) -> Vec<u8> {
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table notes(t)'); c.commit()",
        ])
        .arg(path)
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(path).expect("db")
}

#[tokio::test(flavor = "multi_thread")]
async fn corrupt_empty_and_foreign_state_files_take_the_fail_safe_path_and_stay_in_place() {
    let mut tally = Tally::default();
    for kind in ["corrupt", "empty", "foreign"] {
        let mut stack = Stack::start().await.expect("stack");
        let log = stack.state.path().join("edge.log");
        stack.connect_edge("edge", &log, &[]);
        let token = stack.token("alpha");
        stack.clankie_ok(&["fleet", "set", "--peer-messages", "off"]);
        stack.clankie_ok(&["fleet", "set", "--peer-messages", "on"]);
        stack.clankie_ok(&["auto", "on"]);
        let project = stack.add_project("demo", &[]);
        {
            let c = connect(&stack.mcp_url, &token).await;
            clankie_tests::wait_tool(&c, "edge_slow").await;
            let r = call(
                &c,
                "clankie_call",
                json!({"name": "edge_slow",
                "arguments": {"seconds": 0, "tag": "before"}}),
            )
            .await
            .expect("call");
            assert_eq!(structured(&r)["outcome"], "ok");
        }
        stack.stop();
        let root = stack.state.path().to_path_buf();
        let mut written = HashMap::new();
        for (file, _) in STATE_FILES {
            let path = root.join(file);
            assert!(path.exists(), "{file} exists after use");
            for side in ["-wal", "-shm"] {
                let _ = std::fs::remove_file(root.join(format!("{file}{side}")));
            }
            let bytes = damaged(kind, file);
            std::fs::write(&path, &bytes).expect("damage");
            written.insert(*file, bytes);
            tally.faults += 1;
        }
        stack
            .restart(StackOptions::default())
            .await
            .unwrap_or_else(|e| panic!("the stack comes up over {kind} state: {e}"));
        // Each service with damaged state says so; none says ready.
        let status: Value = serde_json::from_str(&String::from_utf8_lossy(
            &stack.clankie(&["status", "--json"]).stdout,
        ))
        .expect("status json");
        for (_, service) in STATE_FILES {
            if status["services"][service] != "not_ready" {
                tally.violation(format!(
                    "{kind}: {service} reads {} over damaged state",
                    status["services"][service]
                ));
            }
        }
        let (code, body) = clankie_tests::http(&format!("{}/readyz", stack.url), "GET", &[], "");
        if code != 503 {
            tally.violation(format!("{kind}: /readyz says {code}: {body}"));
        }
        // A member hears why, and nothing is dispatched.
        if let Ok(c) = clankie_tests::mcp_client(&stack.mcp_url, &token).await {
            tally.calls += 1;
            match call(
                &c,
                "clankie_call",
                json!({"name": "edge_slow",
                "arguments": {"seconds": 0, "tag": format!("over-{kind}")}}),
            )
            .await
            {
                Ok(r) => {
                    let b = structured(&r);
                    let code = b["error"]["code"].as_str().unwrap_or_default().to_string();
                    if code.is_empty() || code == "internal" || code == "fleet_tools_off" {
                        tally.violation(format!("{kind}: the member heard {b}"));
                    }
                }
                Err(e) => tally.violation(format!("{kind}: the call failed: {e}")),
            }
        }
        // The tracker's owner route names the unreadable database.
        let out = stack.clankie(&["tracker", "call", "list_teams", "{}"]);
        if out.status.success() {
            tally.violation(format!(
                "{kind}: the tracker answered over a damaged database"
            ));
        }
        // The owner's reads say what cannot be read, never an empty answer.
        let out = stack.clankie(&["project", "list"]);
        if out.status.success()
            || !String::from_utf8_lossy(&out.stderr).contains("state_unreadable")
        {
            tally.violation(format!(
                "{kind}: project list over a damaged mailbox: {out:?}"
            ));
        }
        let out = stack.clankie(&["fleet", "status"]);
        if out.status.success() || !String::from_utf8_lossy(&out.stdout).contains("settings file") {
            tally.violation(format!(
                "{kind}: fleet status over damaged settings: {out:?}"
            ));
        }
        // Last, the links file: no bearer is admitted over it.
        stack.stop();
        let links = root.join("admission/links.json");
        let bytes = damaged(kind, "links.json");
        std::fs::write(&links, &bytes).expect("damage links");
        written.insert("admission/links.json", bytes);
        tally.faults += 1;
        stack
            .restart(StackOptions::default())
            .await
            .expect("restart over links");
        tally.calls += 1;
        if clankie_tests::mcp_client(&stack.mcp_url, &token)
            .await
            .is_ok()
        {
            tally.violation(format!("{kind}: a bearer was admitted over damaged links"));
        }
        let (code, _) = clankie_tests::http(&format!("{}/readyz", stack.url), "GET", &[], "");
        if code != 503 {
            tally.violation(format!("{kind}: /readyz says {code} over damaged links"));
        }
        let out = stack.clankie(&["fleet", "status", "--json"]);
        let said: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let named = said["problems"].as_array().is_some_and(|p| {
            p.iter()
                .any(|p| p.as_str().is_some_and(|p| p.contains("links file")))
        });
        if out.status.success() || !named {
            tally.violation(format!("{kind}: fleet status over damaged links: {said}"));
        }
        stack.stop();
        if ran(&log, &format!("over-{kind}")) != 0 {
            tally.violation(format!("{kind}: a call ran over damaged state"));
        }
        for (file, bytes) in &written {
            let now = std::fs::read(root.join(file)).unwrap_or_default();
            if &now != bytes {
                tally.violation(format!("{kind}: {file} was changed"));
            }
        }
        drop(project);
    }
    tally.finish("damaged state files");
}

/// Counts `notifications/tools/list_changed` a client hears.
#[derive(Clone, Default)]
struct Listener(Arc<AtomicUsize>);

impl rmcp::ClientHandler for Listener {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_upstream_and_a_crashing_one_with_its_backoff() {
    let stack = Stack::start_with(StackOptions {
        request_budget_ms: Some(2_000),
        ..Default::default()
    })
    .await
    .expect("stack");
    let log = stack.state.path().join("edge.log");
    stack.connect_edge("edge", &log, &[]);
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let token = stack.token("alpha");
    let heard = Listener::default();
    let client = clankie_tests::mcp_client_with(&stack.mcp_url, &token, heard.clone())
        .await
        .expect("client");
    for tool in ["edge_hang", "time_get_current_time"] {
        clankie_tests::eventually(Duration::from_secs(30), async || {
            let r = call_with(&client, "clankie_tools", json!({"names": [tool]})).await;
            r["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty())
                .then_some(())
        })
        .await;
    }
    let mut tally = Tally::default();

    // Hung: the answer is uncertain with its receipt, and the rest of the
    // host keeps answering.
    tally.faults += 1;
    tally.calls += 2;
    let hung = call_with(
        &client,
        "clankie_call",
        json!({"name": "edge_hang",
        "receiptId": "hung-000001", "arguments": {"tag": "hung"}}),
    )
    .await;
    if hung["outcome"] != "uncertain" || hung["receiptId"] != "hung-000001" {
        tally.violation(format!("a hung upstream answered {hung}"));
    }
    let other = call_with(
        &client,
        "clankie_call",
        json!({"name": "time_get_current_time",
        "arguments": {"timezone": "Etc/UTC"}}),
    )
    .await;
    if other["outcome"] != "ok" {
        tally.violation(format!(
            "another account stalled beside the hung one: {other}"
        ));
    }
    tally.receipts += 1;
    let again = call_with(&client, "clankie_call", json!({"receiptId": "hung-000001"})).await;
    if again["outcome"] != "uncertain" || again["fromReceipt"] != true {
        tally.violation(format!("the hung call does not reconcile: {again}"));
    }

    // Crashing: an upstream that dies 300 ms after every start backs off,
    // doubling, instead of restarting at the minimum forever.
    let heard_before = heard.0.load(Ordering::Relaxed);
    stack.connect_edge("crashy", &log, &[("EDGE_EXIT_AFTER_MS", "300")]);
    let host_log = stack.state.path().join("logs/mcp-host.log");
    let mut backoffs = Vec::new();
    for _ in 0..400 {
        backoffs = file_lines(&host_log)
            .iter()
            .filter(|l| l.contains("account connection closed") && l.contains("crashy"))
            .filter_map(|l| {
                l.split("backoff_ms=")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .collect();
        if backoffs.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tally.faults += backoffs.len();
    if backoffs.len() < 4 || backoffs.windows(2).any(|w| w[1] <= w[0]) {
        tally.violation(format!("the backoff does not grow: {backoffs:?}"));
    }
    stack.clankie_ok(&["disconnect", "crashy"]);
    let heard_now = heard.0.load(Ordering::Relaxed) - heard_before;
    // Each restart changes the list twice (gone, back): coalesced, sessions
    // hear at most once per restart, not twice.
    if heard_now > backoffs.len() + 2 {
        tally.violation(format!(
            "{heard_now} list_changed for {} restarts: not coalesced",
            backoffs.len()
        ));
    }
    println!("crashing upstream: backoffs {backoffs:?} ms, {heard_now} list_changed heard");
    tally.finish("hung and crashing upstreams");
}

async fn call_with(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Listener>,
    tool: &str,
    args: Value,
) -> Value {
    let mut params = rmcp::model::CallToolRequestParams::new(tool.to_string());
    params.arguments = args.as_object().cloned();
    client
        .call_tool(params)
        .await
        .map(|r| structured(&r))
        .unwrap_or_else(|e| json!({"transport": e.to_string()}))
}
