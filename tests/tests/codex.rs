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
        .requests()
        .into_iter()
        .filter(|r| r["api"] == "responses")
        .filter(|r| r["roles"].as_array().and_then(|a| a.last()) == Some(&Value::from("tool")))
        .filter_map(|r| r["last"].as_str().map(str::to_string))
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
