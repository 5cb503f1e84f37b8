//! The deploy units in `deploy/systemd/`: they pass `systemd-analyze
//! verify` once the install paths point at this build, the system unit's
//! hardening keeps `systemd-analyze security` under 5, and `clankie up`
//! speaks the unit's `Type=notify`: READY=1 once it serves, STOPPING=1 as
//! it stops; under nothing but the user unit's environment, `clankie up`
//! brings back the accounts connected from a shell.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use clankie_tests::{bin_dir, repo_root};

/// A unit with its install paths pointed at this build.
fn installed(unit: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let text =
        std::fs::read_to_string(repo_root().join("deploy/systemd").join(unit)).expect("the unit");
    let bin = bin_dir().display().to_string();
    let text = text
        .replace("/usr/local/bin/clankie", &format!("{bin}/clankie"))
        .replace("/usr/local/lib/clankie", &bin);
    let path = dir.join(unit);
    std::fs::write(&path, text).expect("write");
    path
}

/// `clankie --state STATE [FLAGS] up` told to notify a service manager:
/// the running `up` (its output piped) and the manager's socket, which
/// hears READY=1 once it serves.
fn up_notifying(state: &std::path::Path, flags: &[&str]) -> (std::process::Child, UnixDatagram) {
    let socket = state.join("notify.sock");
    let manager = UnixDatagram::bind(&socket).expect("notify socket");
    manager
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let up = std::process::Command::new(bin_dir().join("clankie"))
        .arg("--state")
        .arg(state)
        .args(flags)
        .arg("up")
        .env("NOTIFY_SOCKET", &socket)
        .env("PATH", clankie_tests::peer_path())
        .env("CLANKIE_GATEWAY_ADDR", "127.0.0.1:0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("clankie up");
    (up, manager)
}

#[test]
fn the_units_verify_and_the_system_unit_is_hardened() {
    let dir = tempfile::tempdir().expect("dir");
    for unit in [
        "clankie.service",
        "clankie-user.service",
        "clankie.socket",
        "clankie-user.socket",
    ] {
        let path = installed(unit, dir.path());
        let out = std::process::Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .output()
            .expect("systemd-analyze");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{unit}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let path = installed("clankie.service", dir.path());
    let out = std::process::Command::new("systemd-analyze")
        .args(["security", "--offline=true"])
        .arg(&path)
        .output()
        .expect("systemd-analyze");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let level: f64 = text
        .lines()
        .find_map(|l| l.split("clankie.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in: {text}"));
    assert!(level < 5.0, "exposure {level}: {text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn clankie_up_tells_its_service_manager_when_it_serves_and_when_it_stops() {
    let state = tempfile::Builder::new()
        .prefix("ck")
        .tempdir_in("/tmp")
        .expect("state");
    let (mut up, manager) = up_notifying(state.path(), &[]);
    let mut buf = [0u8; 512];
    let n = manager.recv(&mut buf).expect("a notification");
    let said = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(said.contains("READY=1"), "{said}");
    // Ready means serving: the services answer now.
    let status = std::process::Command::new(bin_dir().join("clankie"))
        .arg("--state")
        .arg(state.path())
        .arg("status")
        .output()
        .expect("status");
    assert_eq!(status.status.code(), Some(0));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("stop");
    let n = manager.recv(&mut buf).expect("a notification");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1"));
    assert!(up.wait().expect("exit").success());
}

/// The `Environment=` assignments of an installed unit.
fn unit_environment(unit: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(unit)
        .expect("the unit")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Environment="))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Waits for READY=1 on `manager`; panics with what `up` said otherwise.
fn ready(manager: &UnixDatagram, up: &mut std::process::Child) {
    let mut buf = [0u8; 512];
    match manager.recv(&mut buf) {
        Ok(n) if String::from_utf8_lossy(&buf[..n]).contains("READY=1") => {}
        other => {
            let _ = up.kill();
            panic!("no READY=1 ({other:?}); up: {:?}", up.wait());
        }
    }
}

fn stop(up: &mut std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("stop");
    assert!(up.wait().expect("exit").success());
}

/// What a service manager gives the user unit is all `clankie up` gets: the
/// unit's own `Environment=` (a PATH without the shell's tool folders), HOME
/// and the notify socket. The accounts connected from a shell, whose
/// programs live on that shell's PATH (a Python venv, an npm prefix), come
/// back verified with their tools.
#[tokio::test(flavor = "multi_thread")]
async fn clankie_up_under_the_user_units_environment_brings_its_accounts_back() {
    let home = tempfile::Builder::new()
        .prefix("ck")
        .tempdir_in("/tmp")
        .expect("home");
    let state = home.path().join(".clankie");
    std::fs::create_dir(&state).expect("state");
    let port = clankie_tests::free_port();
    std::fs::write(
        state.join("config.toml"),
        format!("[gateway]\nlisten = \"127.0.0.1:{port}\"\n"),
    )
    .expect("config");
    let clankie = |args: &[&str]| {
        std::process::Command::new(bin_dir().join("clankie"))
            .arg("--state")
            .arg(&state)
            .args(args)
            .env("PATH", clankie_tests::peer_path())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("clankie")
    };

    // From the owner's shell: up, connect two stdio servers found on its PATH.
    let (mut up, manager) = up_notifying(&state, &[]);
    ready(&manager, &mut up);
    for args in [
        &["connect", "time", "--", "mcp-server-time"][..],
        &[
            "connect",
            "everything",
            "--",
            "mcp-server-everything",
            "stdio",
        ],
    ] {
        let out = clankie(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    stop(&mut up);
    drop(manager);
    std::fs::remove_file(state.join("notify.sock")).expect("old socket");

    // Under the unit: a cleared environment, then what systemd would give.
    let dir = tempfile::tempdir().expect("dir");
    let unit = installed("clankie-user.service", dir.path());
    let env = unit_environment(&unit);
    assert!(
        env.iter()
            .any(|(k, v)| k == "PATH" && !v.contains(".venv") && !v.contains("peers")),
        "{env:?}"
    );
    let socket = state.join("notify.sock");
    let manager = UnixDatagram::bind(&socket).expect("notify socket");
    manager
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut up = std::process::Command::new(bin_dir().join("clankie"))
        .arg("up")
        .env_clear()
        .envs(env)
        .env("HOME", home.path())
        .env("NOTIFY_SOCKET", &socket)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("clankie up under the unit");
    ready(&manager, &mut up);
    let verified = clankie_tests::eventually(Duration::from_secs(30), async || {
        let out = clankie(&["accounts", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let accounts = v["accounts"].as_array()?.clone();
        (accounts.len() == 2
            && accounts
                .iter()
                .all(|a| a["state"] == "verified" && a["tools"].as_u64() > Some(0)))
        .then_some(v)
    })
    .await;
    let said = String::from_utf8_lossy(&clankie(&["accounts"]).stdout).into_owned();
    stop(&mut up);
    assert!(
        verified.is_some(),
        "both accounts back under the unit: {said}"
    );
}

/// The inode of the socket listening on loopback `port` (/proc/net/tcp).
fn listening_inode(port: u16) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let local_port = f.get(1)?.rsplit(':').next()?;
        (u16::from_str_radix(local_port, 16).ok()? == port && f.get(3)? == &"0A")
            .then(|| f.get(9).map(|s| s.to_string()))?
    })
}

/// The inode of the Unix socket listening at `path` (/proc/net/unix).
fn unix_inode(path: &std::path::Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    let path = path.to_str()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(7) == Some(&path)).then(|| f.get(6).map(|s| s.to_string()))?
    })
}

/// `GET /healthz` over the Unix socket at `path`: the raw answer.
fn unix_healthz(path: &std::path::Path) -> String {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(path).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}

/// Whether process `pid` holds the socket with `inode` open.
fn holds(pid: i32, inode: &str) -> bool {
    let want = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == want))
        })
        .unwrap_or(false)
}

/// `systemd-socket-activate` holds the gateway's three listeners (bearer,
/// local-tcp, local-unix at `run/fleet/mcp.sock`) and passes them to
/// `clankie up` by name, as the socket units do: the gateway serves on each
/// (it could not bind the ports itself), no other service holds them or
/// sees the activation variables, and a gateway restarted after a crash
/// serves the same sockets.
#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_serves_the_socket_a_service_manager_passes_across_a_restart() {
    let state = tempfile::Builder::new()
        .prefix("ck")
        .tempdir_in("/tmp")
        .expect("state");
    let port = clankie_tests::free_port();
    let addr = format!("127.0.0.1:{port}");
    let local_port = clankie_tests::free_port();
    let local_addr = format!("127.0.0.1:{local_port}");
    // The local Unix listener is passed at the path bridges look for it.
    let fleet = state.path().join("run/fleet");
    std::fs::create_dir_all(&fleet).expect("run/fleet");
    let unix_path = fleet.join("mcp.sock");
    let out = std::fs::File::create(state.path().join("up.out")).expect("out");
    let mut up = std::process::Command::new("systemd-socket-activate")
        .args(["-l", &addr, "-l", &local_addr, "-l"])
        .arg(&unix_path)
        .arg("--fdname=bearer:local-tcp:local-unix")
        .arg(bin_dir().join("clankie"))
        .arg("--state")
        .arg(state.path())
        .arg("up")
        .env("PATH", clankie_tests::peer_path())
        // The ports are held by the manager: binding them here would fail.
        .env("CLANKIE_GATEWAY_ADDR", &addr)
        .env("CLANKIE_GATEWAY_LOCAL_ADDR", &local_addr)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().expect("out"))
        .stderr(out)
        .spawn()
        .expect("systemd-socket-activate");
    let up_pid = up.id() as i32;
    let url = format!("http://{addr}/healthz");
    // The manager starts the stack at the first connection; that request
    // waits in the backlog and is answered once the gateway serves.
    let listening = clankie_tests::eventually(Duration::from_secs(30), async || {
        let said = std::fs::read_to_string(state.path().join("up.out")).unwrap_or_default();
        said.contains("Listening on").then_some(())
    })
    .await;
    assert!(
        listening.is_some(),
        "systemd-socket-activate did not listen"
    );
    let first = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || clankie_tests::http(&url, "GET", &[], "")).await
    }
    .expect("first request");
    assert_eq!(
        first.0, 200,
        "the first caller waited and was served: {}",
        first.1
    );
    let served = clankie_tests::eventually(Duration::from_secs(90), async || {
        let said = std::fs::read_to_string(state.path().join("up.out")).unwrap_or_default();
        said.contains("clankie is up").then_some(said)
    })
    .await
    .unwrap_or_else(|| std::fs::read_to_string(state.path().join("up.out")).unwrap_or_default());
    assert!(
        served.contains("serving passed sockets: bearer, local-tcp, local-unix"),
        "{served}"
    );
    assert!(
        served.contains(&format!("gateway: http://{addr}")),
        "{served}"
    );
    assert_eq!(clankie_tests::http(&url, "GET", &[], "").0, 200);

    // The local doors answer on what was passed too.
    assert_eq!(
        clankie_tests::http(&format!("http://{local_addr}/healthz"), "GET", &[], "").0,
        200
    );
    assert!(unix_healthz(&unix_path).starts_with("HTTP/1.1 200"));
    let inodes = [
        listening_inode(port).expect("the bearer socket"),
        listening_inode(local_port).expect("the local TCP socket"),
        unix_inode(&unix_path).expect("the local Unix socket"),
    ];
    let gateway = clankie_tests::Stack::children_matching(up_pid, "clankie-gateway");
    assert_eq!(gateway.len(), 1, "one gateway");
    for i in &inodes {
        assert!(
            holds(gateway[0], i),
            "the gateway serves the passed socket {i}"
        );
    }
    for service in ["admission", "tracker", "mcp-host", "mailbox", "auto"] {
        for pid in clankie_tests::Stack::children_matching(up_pid, &format!("clankie-{service}")) {
            for i in &inodes {
                assert!(!holds(pid, i), "{service} holds the gateway's socket");
            }
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&environ).contains("LISTEN_FDS"),
                "{service} sees the activation"
            );
        }
    }

    // The gateway dies; its successor serves the same socket.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gateway[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the gateway");
    let again = clankie_tests::eventually(Duration::from_secs(60), async || {
        let said = std::fs::read_to_string(state.path().join("up.out")).unwrap_or_default();
        said.contains("gateway restarted").then_some(())
    })
    .await;
    assert!(again.is_some(), "the gateway was restarted");
    assert_eq!(clankie_tests::http(&url, "GET", &[], "").0, 200);
    let successor = clankie_tests::Stack::children_matching(up_pid, "clankie-gateway");
    assert!(
        successor.len() == 1
            && successor[0] != gateway[0]
            && inodes.iter().all(|i| holds(successor[0], i)),
        "the new gateway serves the same sockets"
    );
    assert!(unix_healthz(&unix_path).starts_with("HTTP/1.1 200"));

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up_pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("stop");
    assert!(up.wait().expect("exit").success());
}

/// `clankie config check` in `state`, with `env` set; (exit code, stdout,
/// stderr).
fn config_check(state: &std::path::Path, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(bin_dir().join("clankie"))
        .arg("--state")
        .arg(state)
        .args(["config", "check", "--json"])
        .env_remove("CLANKIE_GATEWAY_ADDR")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .envs(env.iter().copied())
        .output()
        .expect("config check");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The state folder's config.toml sits between the defaults and the
/// environment: `config check` says where each value came from, a typo is
/// refused with its line, and `clankie up` listens where the file says and
/// starts its services with the file's OTLP endpoint.
#[tokio::test(flavor = "multi_thread")]
async fn the_config_file_sits_between_the_defaults_and_the_environment() {
    let state = tempfile::Builder::new()
        .prefix("ck")
        .tempdir_in("/tmp")
        .expect("state");
    let setting = |v: &serde_json::Value, key: &str| {
        v["settings"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["key"] == key).cloned())
            .unwrap_or_default()
    };
    // No file: every setting is its default.
    let (code, out, err) = config_check(state.path(), &[]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["exists"], false);
    assert_eq!(setting(&v, "gateway.listen")["source"], "default", "{v}");

    let port = clankie_tests::free_port();
    std::fs::write(
        state.path().join("config.toml"),
        format!(
            "[gateway]\nlisten = \"127.0.0.1:{port}\"\n\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:9\"\n"
        ),
    )
    .expect("config");
    let (code, out, err) = config_check(state.path(), &[]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(setting(&v, "gateway.listen")["source"], "file", "{v}");
    assert_eq!(
        setting(&v, "telemetry.otlp_endpoint")["source"],
        "file",
        "{v}"
    );
    // The environment wins over the file.
    let (_, out, _) = config_check(state.path(), &[("CLANKIE_GATEWAY_ADDR", "127.0.0.1:1")]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(setting(&v, "gateway.listen")["value"], "127.0.0.1:1", "{v}");
    assert_eq!(setting(&v, "gateway.listen")["source"], "env", "{v}");

    // `up` listens where the file says; its services get the file's OTLP
    // endpoint.
    let mut up = std::process::Command::new(bin_dir().join("clankie"))
        .arg("--state")
        .arg(state.path())
        .arg("up")
        .env("PATH", clankie_tests::peer_path())
        .env_remove("CLANKIE_GATEWAY_ADDR")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("clankie up");
    let mut lines = std::io::BufReader::new(up.stdout.take().expect("stdout"));
    let mut said = String::new();
    while !said.contains("gateway:") {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut lines, &mut line).unwrap_or(0) == 0 {
            break;
        }
        said.push_str(&line);
    }
    assert!(
        said.contains(&format!("gateway: http://127.0.0.1:{port}")),
        "{said}"
    );
    let mcp = clankie_tests::Stack::children_matching(up.id() as i32, "clankie-mcp-host");
    let environ = std::fs::read(format!("/proc/{}/environ", mcp[0])).expect("environ");
    assert!(
        String::from_utf8_lossy(&environ)
            .contains("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9"),
        "the services run with the file's endpoint"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("stop");
    assert!(up.wait().expect("exit").success());

    // A typo is refused with its key and line, and nothing starts on it.
    std::fs::write(
        state.path().join("config.toml"),
        "[gateway]\nlisen = \"x\"\n",
    )
    .expect("config");
    let (code, _, err) = config_check(state.path(), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("lisen") && err.contains("line 2"), "{err}");
}

/// `-q` keeps `up`'s progress off the terminal (it still serves and stops
/// as asked); `-vv` puts the command's own debug lines on stderr, where
/// without it there are none.
#[tokio::test(flavor = "multi_thread")]
async fn quiet_says_nothing_and_verbose_says_more() {
    let state = tempfile::Builder::new()
        .prefix("ck")
        .tempdir_in("/tmp")
        .expect("state");
    let clankie = |args: &[&str]| {
        std::process::Command::new(bin_dir().join("clankie"))
            .arg("--state")
            .arg(state.path())
            .args(args)
            .output()
            .expect("clankie")
    };
    let plain = clankie(&["status"]);
    assert_eq!(plain.status.code(), Some(5), "nothing runs here");
    assert!(plain.stderr.is_empty(), "{plain:?}");
    let loud = clankie(&["-vv", "status"]);
    assert_eq!(loud.status.code(), Some(5));
    assert_eq!(loud.stdout, plain.stdout, "the answer is the same");
    assert!(
        String::from_utf8_lossy(&loud.stderr).contains("DEBUG"),
        "{loud:?}"
    );

    let (up, manager) = up_notifying(state.path(), &["-q"]);
    let mut buf = [0u8; 512];
    let n = manager.recv(&mut buf).expect("a notification");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("READY=1"));
    assert_eq!(clankie(&["status"]).status.code(), Some(0), "it serves");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("stop");
    let out = up.wait_with_output().expect("exit");
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The macOS agent is a well-formed property list that runs `clankie up`
/// with the time its drain needs (read with Python's plistlib: no macOS
/// here).
#[test]
fn the_launchd_agent_runs_up_with_time_to_drain() {
    let plist = repo_root().join("deploy/launchd/dev.clankie.up.plist");
    let out = std::process::Command::new(clankie_tests::python())
        .args([
            "-c",
            "import json,plistlib,sys; print(json.dumps(plistlib.load(open(sys.argv[1],'rb'))))",
        ])
        .arg(&plist)
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(p["ProgramArguments"][1], "up", "{p}");
    assert!(p["ExitTimeOut"].as_i64().is_some_and(|t| t >= 10), "{p}");
    assert_eq!(p["Umask"], 0o077, "{p}");
}
