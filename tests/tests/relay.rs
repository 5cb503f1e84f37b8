//! Remote machines (the relay links of a fleet), on a real stack through
//! the owner's CLI: a machine is registered with a one-time enrolment
//! secret that is shown once and kept only as its hash, and the machines
//! file takes the fail-safe path when it cannot be read.

use std::os::unix::fs::PermissionsExt as _;

use clankie_tests::seat::json_of;
use clankie_tests::{Stack, StackOptions};
use serde_json::Value;

fn machines(stack: &Stack) -> Value {
    json_of(&stack.clankie_ok(&["fleet", "machine", "list", "--json"]))
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
