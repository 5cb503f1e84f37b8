//! The deploy units in `deploy/systemd/`: they pass `systemd-analyze
//! verify` once the install paths point at this build, the system unit's
//! hardening keeps `systemd-analyze security` under 5, and `clankie up`
//! speaks the unit's `Type=notify`: READY=1 once it serves, STOPPING=1 as
//! it stops. (That accounts come back under the unit's minimal PATH is
//! `connected_tools::a_broken_upstream_is_named_…`.)

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

#[test]
fn the_units_verify_and_the_system_unit_is_hardened() {
    let dir = tempfile::tempdir().expect("dir");
    for unit in ["clankie.service", "clankie-user.service"] {
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
    let socket = state.path().join("notify.sock");
    let manager = UnixDatagram::bind(&socket).expect("notify socket");
    manager
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut up = std::process::Command::new(bin_dir().join("clankie"))
        .arg("--state")
        .arg(state.path())
        .arg("up")
        .env("NOTIFY_SOCKET", &socket)
        .env("PATH", clankie_tests::peer_path())
        .env("CLANKIE_GATEWAY_ADDR", "127.0.0.1:0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("clankie up");
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
