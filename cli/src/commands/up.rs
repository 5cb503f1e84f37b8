//! `clankie up`: the supervisor of the whole stack.
//!
//! `up` starts every service (admission, tracker, mcp-host, mailbox, auto)
//! and then the gateway as separate processes (their own binaries), in the
//! runtime's start order, each in its own process group so a terminal's
//! Ctrl-C reaches only the supervisor, which then stops them in reverse:
//! gateway first (no new requests), then the services. A service that dies
//! is restarted with exponential backoff and the supervisor says so.
//! Each service's log goes to `$CLANKIE_STATE/logs/<service>.log`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::support::activation::{self, Passed};
use crate::support::{clients, discovery, supervisor};
use anyhow::{Context, bail};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::{Service, owner, state};
use clap::Args;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

#[derive(Args)]
pub struct UpArgs {
    /// Gateway listen address (port 0 picks a free port).
    #[arg(long, env = "CLANKIE_GATEWAY_ADDR", default_value = "127.0.0.1:7755")]
    pub listen: String,
    /// Folder holding the service binaries (default: beside `clankie`).
    #[arg(long, env = "CLANKIE_BIN_DIR")]
    pub bin_dir: Option<PathBuf>,
    /// A Host name the gateway also answers (repeatable), for clients that
    /// reach it by a name of its own (a reverse proxy, a DNS name).
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// On a remote machine: the main stack this stack relays to
    /// (`HOST:PORT`). `up` refuses to start unless this stack is enrolled
    /// there (`clankie fleet machine enrol`); an enrolled stack links
    /// without it too.
    #[arg(long, requires = "machine")]
    pub relay_to: Option<String>,
    /// On a remote machine: its name on the main stack.
    #[arg(long, requires = "relay_to")]
    pub machine: Option<String>,
    /// Start in the background: return once the stack is up (its output
    /// goes to `logs/up.log`; `clankie down` stops it).
    #[arg(long)]
    pub detach: bool,
}

const MIN_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A service up this long has its backoff reset.
const STABLE: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Finds the service binaries: `--bin-dir`, else beside this executable.
/// From a source checkout, missing binaries are built first.
fn locate_binaries(args: &UpArgs) -> anyhow::Result<PathBuf> {
    let dir = match &args.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the clankie executable has no folder")?
            .to_path_buf(),
    };
    // The census helper is started by the admission service, from beside it.
    let missing: Vec<&str> = Service::START_ORDER
        .iter()
        .map(|s| s.binary())
        .chain([HELPER_BINARY])
        .filter(|b| !dir.join(b).exists())
        .collect();
    if missing.is_empty() {
        return Ok(dir);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    if args.bin_dir.is_some() || !manifest.exists() {
        bail!(
            "missing service binaries in {}: {}",
            dir.display(),
            missing.join(", ")
        );
    }
    eprintln!("building service binaries ({}) ...", missing.join(", "));
    let mut cmd =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.arg("build").arg("--manifest-path").arg(&manifest);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    for binary in Service::START_ORDER
        .iter()
        .map(|s| s.binary())
        .chain([HELPER_BINARY])
    {
        cmd.arg("-p").arg(binary);
    }
    let status = cmd.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build of the service binaries failed");
    }
    Ok(dir)
}

/// The census helper, started by admission from beside it.
const HELPER_BINARY: &str = "clankie-helper";

/// A service `up` supervises.
struct Supervised {
    service: Service,
    child: Option<Child>,
    started: Instant,
    backoff: Duration,
    restart_at: Option<Instant>,
}

fn spawn(
    bin_dir: &Path,
    paths: &StatePaths,
    service: Service,
    args: &UpArgs,
    passed: &Passed,
    service_env: &[(&'static str, String)],
) -> anyhow::Result<Child> {
    let name = service.name();
    let logs = paths.logs_dir();
    state::private_dir(&logs)?;
    let log_path = logs.join(format!("{name}.log"));
    // The service writes its log itself, rotating it at a size cap; what it
    // prints before its logger starts (or a panic) lands here too.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let mut cmd = Command::new(bin_dir.join(service.binary()));
    // Only the supervisor speaks to a service manager (NotifyAccess=main).
    cmd.env_remove("NOTIFY_SOCKET")
        .env("CLANKIE_LOG_FILE", &log_path)
        .env("CLANKIE_STATE", paths.root())
        .env("CLANKIE_PARENT_PID", std::process::id().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .kill_on_drop(true);
    activation::strip(&mut cmd);
    cmd.envs(service_env.iter().map(|(k, v)| (k, v)));
    if service == Service::Gateway {
        passed.hand_to(&mut cmd)?;
        cmd.arg("--listen").arg(&args.listen);
        for host in &args.allowed_hosts {
            cmd.arg("--allowed-host").arg(host);
        }
    }
    cmd.spawn()
        .with_context(|| format!("starting clankie-{name}"))
}

async fn wait_healthy(
    paths: &StatePaths,
    service: Service,
    child: &mut Child,
) -> anyhow::Result<()> {
    // The supervisor is not one of the stack's services: it asks as the owner.
    let owner = clients::owner_meta(paths)?;
    let name = service.name();
    let socket = service.socket(paths);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            bail!("clankie-{name} exited during start ({status}); see logs/{name}.log");
        }
        // Liveness: a service whose state is unreadable still starts, and
        // says so through its readiness.
        if clankie_runtime::clients::health(&socket, "", owner.clone())
            .await
            .unwrap_or(false)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("clankie-{name} did not become healthy in 30 s; see logs/{name}.log");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How long `up` waits for the accounts' first verdicts before it says
/// which are degraded (a connection attempt's own bound, and a little).
const FIRST_VERDICTS: Duration = Duration::from_secs(35);

async fn report_degraded(paths: StatePaths) {
    let owner = clients::owner_meta(&paths).unwrap_or_default();
    let deadline = Instant::now() + FIRST_VERDICTS;
    while clankie_runtime::clients::service_state(&paths, Service::McpHost, owner.clone()).await
        != clankie_runtime::clients::ServiceState::Serving
    {
        if Instant::now() > deadline {
            println!("degraded: the mcp-host is not ready; `clankie doctor` says why");
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let degraded = clankie_runtime::clients::degraded_accounts(&paths, owner)
        .await
        .unwrap_or_default();
    super::status::print_degraded(&paths, &degraded);
}

fn signal(child: &Child, sig: Signal) {
    if let Some(pid) = child.id() {
        let _ = kill(Pid::from_raw(pid as i32), sig);
    }
}

/// How long `up --detach` waits for the stack it started.
const DETACHED_START: Duration = Duration::from_secs(90);

/// `up --detach`: this same command without `--detach`, in its own process
/// group with its output in `logs/up.log`; returns once it is serving.
async fn detach(paths: &StatePaths, args: &UpArgs) -> anyhow::Result<ExitCode> {
    if supervisor::running(paths).is_some() {
        bail!(
            "clankie is already running for {} (see `clankie status`)",
            paths.root().display()
        );
    }
    state::private_dir(paths.root())?;
    let logs = paths.logs_dir();
    state::private_dir(&logs)?;
    let log_path = logs.join("up.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.arg("--state")
        .arg(paths.root())
        .args(["up", "--listen", &args.listen]);
    if let Some(dir) = &args.bin_dir {
        cmd.arg("--bin-dir").arg(dir);
    }
    for host in &args.allowed_hosts {
        cmd.arg("--allowed-host").arg(host);
    }
    if let (Some(to), Some(machine)) = (&args.relay_to, &args.machine) {
        cmd.args(["--relay-to", to, "--machine", machine]);
    }
    use std::os::unix::process::CommandExt as _;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("starting clankie up in the background")?;
    let until = Instant::now() + DETACHED_START;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            bail!(
                "clankie up stopped while starting ({status}); see {}",
                log_path.display()
            );
        }
        let up = supervisor::running(paths).is_some();
        if up && let Ok(d) = discovery::read(paths) {
            let state = clankie_runtime::clients::service_state(
                paths,
                Service::Gateway,
                clients::owner_meta(paths).unwrap_or_default(),
            )
            .await;
            if state != clankie_runtime::clients::ServiceState::Down {
                crate::say!("clankie is up in the background");
                crate::say!("  gateway: {} (MCP at {}/mcp)", d.url, d.url);
                crate::say!("  state:   {}", paths.root().display());
                crate::say!("  log:     {}", log_path.display());
                crate::say!("  stop with `clankie down`");
                return Ok(ExitCode::SUCCESS);
            }
        }
        if Instant::now() > until {
            bail!(
                "clankie up did not come up in {} s; see {}",
                DETACHED_START.as_secs(),
                log_path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn run(
    paths: StatePaths,
    mut args: UpArgs,
    matches: clap::ArgMatches,
) -> anyhow::Result<ExitCode> {
    // The state folder's config.toml, under the environment and the flags.
    let file = super::config::load(&paths)?;
    let resolved = super::config::apply(&file, &mut args, &matches);
    if let (Some(to), Some(machine)) = (&args.relay_to, &args.machine) {
        super::machine::check_enrolled(&paths, to, machine)?;
    }
    if args.detach {
        return detach(&paths, &args).await;
    }
    state::private_dir(paths.root())?;
    // A state folder an older release wrote may hold readable logs or a
    // readable database: nothing in it is anyone else's to read.
    let tightened = state::tighten(paths.root()).context("making the state folder private")?;
    if tightened > 0 {
        crate::say!("made {tightened} file(s) in the state folder private to this user");
    }
    owner::ensure_owner_token(&paths.owner_credential())
        .context("creating the owner credential")?;
    if clankie_runtime::clients::health(
        &Service::Admission.socket(&paths),
        Service::Admission.health_name(),
        clients::owner_meta(&paths)?,
    )
    .await
    .unwrap_or(false)
    {
        bail!(
            "clankie is already running for {} (see `clankie status`)",
            paths.root().display()
        );
    }
    // Sockets a service manager passed (socket activation) go to the
    // gateway, and to each gateway after a restart.
    let passed = Passed::from_env().context("taking the sockets the service manager passed")?;
    if !passed.names().is_empty() {
        crate::say!("serving passed sockets: {}", passed.names().join(", "));
    }
    let bin_dir = locate_binaries(&args)?;
    state::private_dir(&paths.run_dir())?;
    supervisor::record(&paths).context("recording the supervisor in run/up.json")?;
    let _recorded = Recorded(paths.clone());
    let shutdown = clankie_runtime::shutdown::on_signals();
    let mut services: Vec<Supervised> = Vec::new();
    for service in Service::START_ORDER {
        let mut child = spawn(
            &bin_dir,
            &paths,
            service,
            &args,
            &passed,
            &resolved.service_env,
        )?;
        if let Err(e) = wait_healthy(&paths, service, &mut child).await {
            for s in services.iter_mut().rev() {
                if let Some(c) = &mut s.child {
                    stop(c).await;
                }
            }
            stop(&mut child).await;
            return Err(e);
        }
        services.push(Supervised {
            service,
            child: Some(child),
            started: Instant::now(),
            backoff: MIN_BACKOFF,
            restart_at: None,
        });
    }
    let gateway = discovery::read(&paths).map(|d| d.url).unwrap_or_default();
    // A restarted gateway keeps the address bridges already know, even when
    // the first one picked a free port.
    if let Some(addr) = gateway.strip_prefix("http://") {
        args.listen = addr.to_string();
    }
    crate::say!("clankie is up");
    crate::say!("  gateway: {} (MCP at {}/mcp)", gateway, gateway);
    crate::say!("  state:   {}", paths.root().display());
    crate::say!("  stop with Ctrl-C");
    // Under a service manager (Type=notify): ready now.
    if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]) {
        eprintln!("clankie: could not tell the service manager it is ready: {e}");
    }
    // Once every account from the file had its first verdict (the
    // mcp-host is ready only then), one that did not verify is named.
    tokio::spawn(report_degraded(paths.clone()));

    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        for s in services.iter_mut() {
            if let Some(child) = &mut s.child
                && let Ok(Some(status)) = child.try_wait()
            {
                if s.started.elapsed() > STABLE {
                    s.backoff = MIN_BACKOFF;
                }
                println!(
                    "{} exited ({}); restarting in {} ms",
                    s.service,
                    status,
                    s.backoff.as_millis()
                );
                s.child = None;
                s.restart_at = Some(Instant::now() + s.backoff);
                s.backoff = (s.backoff * 2).min(MAX_BACKOFF);
            }
            if s.child.is_none() && s.restart_at.is_some_and(|t| Instant::now() >= t) {
                s.restart_at = None;
                match spawn(
                    &bin_dir,
                    &paths,
                    s.service,
                    &args,
                    &passed,
                    &resolved.service_env,
                ) {
                    Ok(mut child) => match wait_healthy(&paths, s.service, &mut child).await {
                        Ok(()) => {
                            crate::say!("{} restarted", s.service);
                            s.child = Some(child);
                            s.started = Instant::now();
                        }
                        Err(e) => {
                            println!("{} failed to restart: {e:#}", s.service);
                            stop(&mut child).await;
                            s.restart_at = Some(Instant::now() + s.backoff);
                            s.backoff = (s.backoff * 2).min(MAX_BACKOFF);
                        }
                    },
                    Err(e) => {
                        println!("{} failed to restart: {e:#}", s.service);
                        s.restart_at = Some(Instant::now() + s.backoff);
                        s.backoff = (s.backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        }
    }
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    crate::say!("stopping");
    for s in services.iter_mut().rev() {
        if let Some(c) = &mut s.child {
            stop(c).await;
        }
    }
    crate::say!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Forgets `run/up.json` however `up` ends.
struct Recorded(StatePaths);

impl Drop for Recorded {
    fn drop(&mut self) {
        supervisor::forget(&self.0);
    }
}

/// SIGTERM, wait for the drain, SIGKILL after the grace period.
async fn stop(child: &mut Child) {
    signal(child, Signal::SIGTERM);
    if tokio::time::timeout(STOP_GRACE, child.wait())
        .await
        .is_err()
    {
        signal(child, Signal::SIGKILL);
        let _ = child.wait().await;
    }
}
