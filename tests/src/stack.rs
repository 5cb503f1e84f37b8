//! A whole stack started by the real `clankie up` in a private state
//! folder, optionally as an ordinary user.

use parking_lot::Mutex;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;

use crate::*;

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
    /// Run the stack in this network namespace (`ip netns exec`; root).
    pub netns: Option<String>,
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
        self.fleet_bridge_with(token, &[]).await
    }

    /// The fleet bridge with `env` more in its environment.
    pub async fn fleet_bridge_with(
        &self,
        token: &str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<RunningService<RoleClient, ()>> {
        let mut cmd = tokio::process::Command::new(bin_dir().join("clankie"));
        cmd.args(["mcp", "--fleet"])
            .env("CLANKIE_STATE", self.state.path())
            .env("CLANKIE_FLEET_TOKEN", token)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied());
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
        if signal == nix::sys::signal::Signal::SIGSTOP {
            return crate::pause(pid);
        }
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)
            .unwrap_or_else(|e| panic!("signalling {service}: {e}"));
    }

    /// Creates built-in team `team` and binds project `project` (at
    /// `revision`) to it; returns the project as `project set` printed it.
    pub fn bind_builtin(&self, project: &str, revision: u64, team: &str) -> Value {
        self.clankie_ok(&["tracker", "team", team, "--name", team]);
        let set = self.clankie_ok(&[
            "project",
            "set",
            project,
            "--revision",
            &revision.to_string(),
            "--tracker",
            "builtin",
            "--team",
            team,
        ]);
        serde_json::from_str(&set).unwrap_or_else(|e| panic!("not JSON ({e}): {set}"))
    }

    /// `kill -9` of one of this stack's services; returns once its
    /// supervisor restarted it.
    pub async fn kill_restarted(&self, service: &str) {
        self.signal(service, nix::sys::signal::Signal::SIGKILL);
        let restarted = format!("{service} restarted");
        assert!(
            self.wait_line(&restarted, Duration::from_secs(30)).await,
            "{:?}",
            self.lines()
        );
    }

    /// The parent pid of a process, from `/proc/PID/stat`.
    pub(crate) fn ppid(proc_dir: &Path) -> i32 {
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
    let mut cmd = match &options.netns {
        // `ip netns exec` execs clankie in place: the same process.
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&clankie);
            c
        }
        None => Command::new(&clankie),
    };
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
