//! Codex as a fleet worker, with the real binary in a real tmux pane
//! against the scripted model: hired with a home of its own where the
//! bridge is registered with the pane's variables, calling connected tools
//! whose receipts its model reads, and reporting to its lead.

use std::time::Duration;

use clankie_tests::claude::ClaudeStack;
use clankie_tests::codex::CodexWorker;
use clankie_tests::file_lines;
use serde_json::Value;

/// Codex's first turn finds the fleet's tools in the namespace the bridge
/// registered, calls a connected tool, reads its receipt and outcome, and
/// reports to its lead through `message_clankie`: the bridge had the pane
/// (`TMUX_PANE`) because the registration names it in `env_vars`.
#[tokio::test(flavor = "multi_thread")]
async fn a_codex_worker_calls_a_connected_tool_sees_its_receipt_and_reports() {
    let f = ClaudeStack::start().await;
    f.stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let worker = CodexWorker::hire(
        &f.stack,
        f.dir.path(),
        &f.model,
        &f.lead,
        "a",
        r#"CALL clankie_call {"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}} ;; CALL message_clankie {"text": "codex says {{lastre:\"datetime\":\"([^\"]+)\"}}"} ;; SAY done"#,
    );
    let config = std::fs::read_to_string(worker.profile.join("config.toml")).expect("config");
    assert!(
        config.contains("[mcp_servers.clankie]") && config.contains("TMUX_PANE"),
        "{config}"
    );
    let heard = f
        .lead_hears("codex says 20", Duration::from_secs(120))
        .await
        .unwrap_or_else(|| {
            panic!(
                "the lead never heard Codex\n{}\n{:?}",
                f.tmux.run(&["capture-pane", "-p", "-t", worker.pane()]),
                file_lines(&f.model.log)
            )
        });
    assert_eq!(heard["untrusted"], true, "{heard}");
    let call = f
        .model
        .tool_results(Some("responses"))
        .into_iter()
        .find(|l| l.contains("datetime"))
        .unwrap_or_else(|| panic!("no call result reached the model"));
    assert!(
        call.contains("rcpt_") && call.contains(r#""outcome":"ok""#),
        "{call}"
    );
    let offered: Vec<Value> = f
        .model
        .requests()
        .iter()
        .flat_map(|r| r["tools"].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(
        offered
            .iter()
            .any(|t| t["name"] == "clankie_call" && t["namespace"] == "mcp__clankie"),
        "{offered:?}"
    );
}

/// The lead's message reaches the running Codex session as a turn on its
/// thread, started through Codex's own app-server (Codex has no way for an
/// MCP server to push into a session): the TUI shows it, the model answers
/// it, and the answer reaches the lead. The delivery was acknowledged once.
#[tokio::test(flavor = "multi_thread")]
async fn a_leads_message_reaches_a_running_codex_thread_as_a_turn() {
    let f = ClaudeStack::start().await;
    let worker = CodexWorker::hire(&f.stack, f.dir.path(), &f.model, &f.lead, "a", "SAY ready");
    let screen = || f.tmux.run(&["capture-pane", "-p", "-t", worker.pane()]);
    // The first turn has run: Codex's thread exists.
    let ready = clankie_tests::eventually(Duration::from_secs(60), async || {
        screen().contains("• ready").then_some(())
    })
    .await;
    assert!(ready.is_some(), "{}", screen());
    let sent = clankie_tests::seat::json_of(&f.stack.clankie_ok(&[
        "message",
        worker.hire_id(),
        "CALL message_clankie {\"text\": \"codex heard the lead\"}\nSAY on it",
        "--conversation",
        &f.lead,
    ]));
    let heard = f
        .lead_hears("codex heard the lead", Duration::from_secs(90))
        .await
        .unwrap_or_else(|| panic!("{}\n{:?}", screen(), file_lines(&f.model.log)));
    assert_eq!(heard["untrusted"], true);
    let delivery = sent["deliveryId"].as_str().expect("delivery");
    // The turn opened with who the message is from, on the same thread.
    let opened = f
        .model
        .requests()
        .into_iter()
        .filter_map(|r| r["last"].as_str().map(str::to_string))
        .find(|l| l.contains(delivery))
        .unwrap_or_else(|| panic!("the model never saw the delivery"));
    assert!(
        opened.starts_with("[clankie: a message from your lead"),
        "{opened}"
    );
    assert!(screen().contains("on it"), "{}", screen());
    // Closing the hire stops the app-server daemon Codex left for its home.
    let packages = worker.profile.join("packages");
    let daemon = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                std::fs::read_link(e.path().join("exe")).is_ok_and(|x| x.starts_with(&packages))
            })
            .count()
    };
    assert!(
        daemon() > 0,
        "Codex runs its app-server from the hire's home"
    );
    f.stack
        .clankie_ok(&["close", worker.hire_id(), "--conversation", &f.lead]);
    let stopped = clankie_tests::eventually(Duration::from_secs(30), async || {
        (daemon() == 0).then_some(())
    })
    .await;
    assert!(
        stopped.is_some(),
        "the hire's daemon still runs after close"
    );
}

/// The names Codex offered its model in the bridge's namespace, in the
/// newest request whose last message holds `needle`.
fn offered_after(f: &ClaudeStack, needle: &str) -> Vec<String> {
    f.model
        .requests()
        .into_iter()
        .rev()
        // Codex's side requests (titling the thread) offer no tools.
        .filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .find(|r| r["last"].as_str().is_some_and(|l| l.contains(needle)))
        .map(|r| {
            r["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t["namespace"] == "mcp__clankie")
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Codex logs `tools/list_changed` without refreshing what its model may
/// call. The bridge makes it take a changed catalog through Codex's
/// app-server (the registration's environment gets the new revision, then
/// a reload), so a running thread's catalog follows `fleet set --tools`:
/// empty of the connected tools while off, back when on, and an account
/// connected meanwhile is found, all without restarting Codex.
#[tokio::test(flavor = "multi_thread")]
async fn a_running_codex_thread_follows_the_fleets_catalog_without_a_restart() {
    let f = ClaudeStack::start().await;
    let worker = CodexWorker::hire(&f.stack, f.dir.path(), &f.model, &f.lead, "a", "SAY ready");
    let screen = || f.tmux.run(&["capture-pane", "-p", "-t", worker.pane()]);
    let shows = |text: &'static str| {
        let screen = &screen;
        async move {
            clankie_tests::eventually(Duration::from_secs(60), async || {
                screen().contains(text).then_some(())
            })
            .await
            .is_some()
        }
    };
    assert!(shows("• ready").await, "{}", screen());
    let message = |text: &str| {
        f.stack
            .clankie_ok(&["message", worker.hire_id(), text, "--conversation", &f.lead]);
    };
    message("SAY turn one");
    assert!(shows("• turn one").await, "{}", screen());
    let before = offered_after(&f, "SAY turn one");
    assert!(
        before.contains(&"clankie_call".to_string()),
        "{before:?} {:?}",
        f.model
            .requests()
            .iter()
            .map(|r| (r["last"].clone(), r["tools"].as_array().map(Vec::len)))
            .collect::<Vec<_>>()
    );

    let config = worker.profile.join("config.toml");
    let revision = || {
        std::fs::read_to_string(&config)
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains("CLANKIE_CATALOG_REVISION"))
            .map(str::to_string)
    };
    let first = revision();
    f.stack.clankie_ok(&["fleet", "set", "--tools", "off"]);
    let refreshed = clankie_tests::eventually(Duration::from_secs(60), async || {
        revision().filter(|r| Some(r) != first.as_ref())
    })
    .await
    .expect("the bridge persisted the new catalog's revision through Codex's app-server");
    message("SAY turn two");
    assert!(shows("• turn two").await, "{}", screen());
    let off = offered_after(&f, "SAY turn two");
    assert!(
        !off.contains(&"clankie_call".to_string()),
        "tools off: {off:?}"
    );

    f.stack
        .clankie_ok(&["fleet", "set", "--tools", "connected"]);
    f.stack.connect_stdio("time", &["mcp-server-time"], &[]);
    clankie_tests::eventually(Duration::from_secs(60), async || {
        revision().filter(|r| *r != refreshed)
    })
    .await
    .expect("the catalog came back");
    message(
        "CALL clankie_tools {\"query\": \"current time\"}\nCALL message_clankie {\"text\": \"found {{lastre:(time_get_current_time)}}\"}\nSAY turn three",
    );
    assert!(
        f.lead_hears("found time_get_current_time", Duration::from_secs(90))
            .await
            .is_some(),
        "{}\n{:?}",
        screen(),
        file_lines(&f.model.log)
    );
    let on = offered_after(&f, "turn three");
    assert!(
        on.contains(&"clankie_call".to_string()),
        "tools back on: {on:?}"
    );
}

/// Codex outlives a restart of the stack: its app-server and its bridge
/// stay, the bridge finds the new gateway on the same socket, and the seat
/// keeps its delivery path and `message_clankie`, held against the
/// registration `local-codex-seats.json` kept: the app-server the bridge
/// runs under and the pane's Codex. With that file unreadable at start, it
/// is moved aside and the seat is not restored: its `message_clankie` is
/// refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_codex_seat_keeps_message_clankie_across_a_stack_restart() {
    let mut f = ClaudeStack::start().await;
    let worker = CodexWorker::hire(&f.stack, f.dir.path(), &f.model, &f.lead, "a", "SAY ready");
    let ready = clankie_tests::eventually(Duration::from_secs(60), async || {
        f.tmux
            .run(&["capture-pane", "-p", "-t", worker.pane()])
            .contains("• ready")
            .then_some(())
    })
    .await;
    assert!(ready.is_some());
    // The registration names the hire's own app-server (the daemon Codex
    // runs from its home's packages) and the pane's Codex.
    let registry = f.stack.state.path().join("local-codex-seats.json");
    let seats =
        clankie_tests::seat::json_of(&std::fs::read_to_string(&registry).expect("registry"));
    let seat = &seats["seats"][0];
    assert_eq!(seat["hireId"], worker.hire_id(), "{seats}");
    let exe = |who: &str| {
        let pid = seat[who]["pid"].as_i64().expect("pid");
        std::fs::read_link(format!("/proc/{pid}/exe")).expect("alive")
    };
    assert!(
        exe("server").starts_with(worker.profile.join("packages")),
        "{seats}"
    );
    assert!(
        exe("occupant").starts_with(clankie_tests::peers().join("codex")),
        "{seats}"
    );
    f.stack
        .restart(clankie_tests::StackOptions::default())
        .await
        .expect("restart");
    f.stack.clankie_ok(&[
        "message",
        worker.hire_id(),
        "CALL message_clankie {\"text\": \"still here after the restart\"}\nSAY ok",
        "--conversation",
        &f.lead,
    ]);
    assert!(
        f.lead_hears("still here after the restart", Duration::from_secs(120))
            .await
            .is_some(),
        "{}\n{:?}",
        f.tmux.run(&["capture-pane", "-p", "-t", worker.pane()]),
        file_lines(&f.model.log)
    );
    // An unreadable registration file: moved aside, no seat restored.
    f.stack.stop();
    std::fs::write(&registry, b"{\"version\": 1, \"seats\": [").expect("corrupt");
    f.stack
        .restart(clankie_tests::StackOptions::default())
        .await
        .expect("restart");
    let aside: Vec<_> = std::fs::read_dir(f.stack.state.path())
        .expect("state")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("local-codex-seats.unreadable-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "the unreadable file is kept aside");
    assert_eq!(
        std::fs::read(aside[0].path()).expect("aside"),
        b"{\"version\": 1, \"seats\": ["
    );
    // The owner types a turn into the pane; its message_clankie is refused.
    f.tmux.run(&[
        "send-keys",
        "-t",
        worker.pane(),
        "-l",
        "CALL message_clankie {\"text\": \"unrestored seat speaks\"} ;; SAY ok",
    ]);
    // Keys that follow typed text at once are taken as part of a paste.
    tokio::time::sleep(Duration::from_millis(800)).await;
    f.tmux.run(&["send-keys", "-t", worker.pane(), "Enter"]);
    let mailbox_log = f.stack.state.path().join("logs/mailbox.log");
    let refused = clankie_tests::eventually(Duration::from_secs(120), async || {
        std::fs::read_to_string(&mailbox_log)
            .ok()?
            .lines()
            .any(|l| l.contains("codex_seat_unrestored") && l.contains(worker.hire_id()))
            .then_some(())
    })
    .await;
    assert!(
        refused.is_some(),
        "{}\n{}",
        f.stack.log_tails(&["mailbox"], 20),
        f.tmux.run(&["capture-pane", "-p", "-t", worker.pane()])
    );
    // The model reads the refusal as its tool's answer; the lead hears
    // nothing.
    let answered = clankie_tests::eventually(Duration::from_secs(60), async || {
        f.model
            .tool_results(None)
            .iter()
            .any(|r| r.contains("codex_seat_unverified"))
            .then_some(())
    })
    .await;
    assert!(
        answered.is_some(),
        "{:?}\n{}\n{:?}",
        f.model.tool_results(None),
        f.tmux.run(&["capture-pane", "-p", "-t", worker.pane()]),
        file_lines(&f.model.log)
    );
    let transcript = f.stack.clankie_ok(&["transcript", &f.lead]);
    assert!(
        !transcript.contains("unrestored seat speaks"),
        "{transcript}"
    );
}
