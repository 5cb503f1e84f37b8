//! The worker sandbox is an allow-list, tried from inside a hire's pane as a
//! hostile worker would, with the stack run as root and as an ordinary user:
//! only the workspace, the profile and private temporary folders can be
//! written; nothing a service runs later can be changed, through any path or
//! hard link; a root-run hire reaches no sysctl, `/etc`, library or cgroup;
//! no other terminal is there; the owner's secrets and the stack's sockets
//! are absent.

use std::path::Path;
use std::time::Duration;

use clankie_tests::sandbox::Scene;
use clankie_tests::seat::{Seat, json_of};
use serde_json::{Value, json};

/// The failures a write may meet: a read-only mount, or (for an ordinary
/// user and another's file) the file's own permissions first.
fn refused(answer: &Value, root: bool) -> bool {
    match answer.as_str() {
        Some("EROFS") => true,
        Some("EACCES" | "EPERM") => !root,
        _ => false,
    }
}

fn sha(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

async fn confined(ordinary: bool) {
    let scene = Scene::start(ordinary).await;
    let root = scene.user.is_none() && nix::unistd::geteuid().is_root();
    let before: Vec<Vec<u8>> = scene.upstream.iter().map(|(_, p)| sha(p)).collect();
    let seen = scene.probe().await;

    // The owner's secrets and the stack's sockets are absent.
    assert_eq!(seen["owner_token"], "ENOENT", "{seen}");
    assert_eq!(
        seen["state_tree"],
        json!([
            "run",
            "run/fleet",
            "run/fleet/gateway.json",
            "run/fleet/mcp.sock"
        ]),
        "{seen}"
    );
    for (socket, answer) in seen["internal"].as_object().expect("internal") {
        assert_eq!(answer, "ENOENT", "{socket}: {seen}");
    }
    assert_eq!(seen["local_mcp"], "ok", "{seen}");
    assert_eq!(seen["hidden"], json!([]), "{seen}");
    assert_eq!(seen["credentials_file"], "EACCES", "{seen}");
    // The state folder is a mount point on a read-only parent.
    let renamed = &seen["rename_state"];
    assert!(renamed == "EBUSY" || renamed == "EROFS", "{seen}");
    assert_eq!(seen["services_visible"], json!([]), "{seen}");
    assert_eq!(seen["tmux"], "ENOENT", "{seen}");
    // Nothing a service runs later can be changed, nor planted beside.
    for (name, answer) in seen["files"].as_object().expect("files") {
        assert!(refused(answer, root), "{name} is writable: {seen}");
    }
    for (name, answer) in seen["dirs"].as_object().expect("dirs") {
        assert!(
            refused(answer, root),
            "a file could be planted in {name}: {seen}"
        );
    }
    assert_eq!(seen["hard_link"], "EXDEV", "{seen}");
    // What a root-run hire would otherwise reach without any capability.
    for name in ["core_pattern", "etc", "libc", "cgroup"] {
        assert!(
            refused(&seen["root"][name], root),
            "{name} is writable: {seen}"
        );
    }
    let sysrq = &seen["root"]["sysrq"];
    assert!(sysrq == "ENOENT" || refused(sysrq, root), "{seen}");
    assert_eq!(seen["root"]["block_device"], "ENOENT", "{seen}");
    // Its own terminal and no other.
    assert_eq!(seen["pts"], json!(["ptmx"]), "{seen}");
    assert_eq!(seen["other_tty"], "ENOENT", "{seen}");
    assert_eq!(seen["own_tty"], "/dev/console", "{seen}");
    // Writable: the workspace, the profile and a private /tmp; not the home.
    assert_eq!(seen["write"]["workspace"], "ok", "{seen}");
    assert_eq!(seen["write"]["profile"], "ok", "{seen}");
    assert!(refused(&seen["write"]["home"], root), "{seen}");
    assert_eq!(seen["tmp"], "ok", "{seen}");
    let marker = seen["tmp_marker"].as_str().expect("marker");
    assert!(!Path::new(marker).exists(), "the hire's /tmp is its own");
    // No capability inside: a forked child cannot name its parent.
    assert_eq!(seen["forged_credentials"], "EPERM", "{seen}");
    // Nothing outside moved or changed.
    assert!(scene.stack.state.path().join("owner.token").exists());
    let after: Vec<Vec<u8>> = scene.upstream.iter().map(|(_, p)| sha(p)).collect();
    assert_eq!(before, after, "the upstream's code is unchanged");
    assert!(!scene.workspace.join("linked").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_hire_of_a_stack_run_as_root_reaches_only_its_allow_list() {
    confined(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_hire_of_a_stack_run_as_an_ordinary_user_reaches_only_its_allow_list() {
    confined(true).await;
}

/// Inside the allow-list the fleet still works: the pane-lineage proof
/// holds, the bridge reaches a connected tool with no token, and seats
/// message each other.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_hire_still_reaches_its_tools_and_its_peers() {
    let scene = Scene::start(false).await;
    let stack = &scene.stack;
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let doctor = json_of(&stack.clankie_ok(&["doctor", "--json"]));
    assert_eq!(doctor["workerSandbox"]["setting"], "on", "{doctor}");
    assert_eq!(doctor["workerSandbox"]["available"], true, "{doctor}");
    let dir = tempfile::tempdir().expect("dir");
    let a = Seat::hire(stack, dir.path(), "a", &scene.lead).await;
    let b = Seat::hire(stack, dir.path(), "b", &scene.lead).await;
    assert_eq!(a.hire["sandboxed"], true);
    let r = a
        .call(
            "clankie_call",
            json!({ "name": "time_get_current_time", "arguments": { "timezone": "Etc/UTC" } }),
        )
        .await;
    assert_eq!(r["result"]["outcome"], "ok", "{r}");
    let sent = a
        .call(
            "message_peer",
            json!({ "seat": b.seat_id(), "text": "hello from a sandbox" }),
        )
        .await;
    assert_eq!(sent["isError"], false, "{sent}");
    tokio::time::timeout(
        Duration::from_secs(60),
        b.wait_inbox("hello from a sandbox"),
    )
    .await
    .expect("delivered");
}
