//! Claude Code as a fleet worker, with the real binary in a real tmux pane
//! against the scripted model: hired with its own profile and the worker
//! plugin, briefed through the plugin's channel, reporting to its lead, and
//! calling connected tools whose receipts its model reads.

use std::time::Duration;

use clankie_tests::claude::ClaudeStack;
use clankie_tests::file_lines;

/// The lead's brief reaches the running Claude session through the
/// plugin's channel; Claude finds a connected tool, calls it, and its model
/// reads the call's receipt and outcome in the result; `message_clankie`
/// carries the answer to the lead. Nothing of the owner's own Claude
/// configuration was used or written.
#[tokio::test(flavor = "multi_thread")]
async fn a_claude_worker_is_briefed_calls_a_connected_tool_sees_its_receipt_and_reports() {
    let f = ClaudeStack::start().await;
    f.stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let worker = f.hire("a");
    assert_eq!(worker.hire["command"][0], "env", "{}", worker.hire);
    f.brief(
        &worker,
        &[
            r#"CALL clankie_tools {"query": "current time"}"#,
            r#"CALL clankie_call {"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}}"#,
            r#"CALL message_clankie {"text": "the time, {{lastre:\"datetime\":\"([^\"]+)\"}}"}"#,
            "SAY done",
        ],
    );
    let heard = f
        .lead_hears("the time, 20", Duration::from_secs(120))
        .await
        .unwrap_or_else(|| {
            panic!(
                "the lead never heard the time\n{}\n{:?}",
                f.screen(&worker),
                file_lines(&f.model.log)
            )
        });
    assert_eq!(heard["untrusted"], true, "{heard}");
    // The model read the receipt and outcome in the call's result.
    let results = f.model.tool_results(Some("messages"));
    let call = results
        .iter()
        .find(|l| l.contains("datetime"))
        .unwrap_or_else(|| panic!("no call result reached the model: {results:?}"));
    // Claude shows the model a result's structured content where it has
    // one: the receipt rides there too.
    assert!(
        call.contains("rcpt_") && call.contains(r#""outcome":"ok""#),
        "{call}"
    );
    // The plugin's tools were offered under its server's name.
    let offered: Vec<String> = f
        .model
        .requests()
        .iter()
        .flat_map(|r| r["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        offered
            .iter()
            .any(|n| n == "mcp__plugin_clankie-worker_clankie__clankie_call"),
        "{offered:?}"
    );
    // The hire's profile holds what Claude needed, nothing in the owner's.
    assert!(worker.profile.join(".claude.json").exists());
    assert!(
        worker
            .profile
            .join("plugins/installed_plugins.json")
            .exists()
    );
}
