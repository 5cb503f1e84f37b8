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
    // The pane runs the exact launcher, `clankie claude`.
    assert_eq!(worker.hire["command"][1], "claude", "{}", worker.hire);
    assert_eq!(worker.hire["harness"], "claude", "{}", worker.hire);
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

/// The exact launcher: a Claude hire's pane runs `clankie claude`, which
/// stays the foreground leader with Claude as its direct child, and the
/// seat names Claude (the hire's occupant is Claude, its parent the
/// launcher), so the lead's brief reaches it. The same Claude behind a
/// generic wrapper (`sh -c`, around the very same launcher) is refused as
/// `launcher_mismatch` on every seat route, while its pane's report still
/// reaches the lead.
#[tokio::test(flavor = "multi_thread")]
async fn the_launcher_chain_admits_clankie_claude_and_refuses_a_generic_wrapper() {
    use clankie_proto::mailbox::v1 as mailbox_pb;
    use clankie_runtime::grpc::Meta;
    let f = ClaudeStack::start().await;
    let worker = f.hire("a");
    f.brief(
        &worker,
        &[
            r#"CALL list_fleet_seats {}"#,
            r#"CALL message_clankie {"text": "launched as {{lastre:\"agentExecutable\":\"([^\"]+)\"}}"}"#,
            "SAY ok",
        ],
    );
    let heard = f
        .lead_hears("launched as", Duration::from_secs(120))
        .await
        .unwrap_or_else(|| panic!("{}\n{:?}", f.screen(&worker), file_lines(&f.model.log)));
    let claude = std::fs::canonicalize(clankie_tests::claude::claude_bin()).expect("claude");
    // The seat is bound to Claude itself, the launcher's direct child.
    assert_eq!(
        heard["text"],
        format!("launched as {}", claude.display()),
        "{heard}"
    );
    let roster = clankie_tests::seat::json_of(&f.stack.clankie_ok(&["roster", "--json"]));
    let occupant = roster["hires"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["hireId"] == worker.hire_id()))
        .map(|h| h["occupantPid"].as_i64().unwrap_or(0))
        .expect("the hire");
    // `--wait-ready` returned once its seat was ready.
    assert_eq!(worker.hire["readiness"], "ready", "{}", worker.hire);
    let exe = std::fs::read_link(format!("/proc/{occupant}/exe")).expect("occupant");
    assert_eq!(exe, claude);
    let status = std::fs::read_to_string(format!("/proc/{occupant}/status")).expect("status");
    let parent = status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .map(|p| p.trim().to_string())
        .expect("parent");
    let launcher = std::fs::read(format!("/proc/{parent}/cmdline")).expect("launcher");
    let launcher: Vec<&[u8]> = launcher.split(|b| *b == 0).collect();
    assert_eq!(launcher[1], b"claude");

    // A generic wrapper around the same launcher and Claude.
    let profile = f.dir.path().join("claude-wrapped");
    std::fs::create_dir_all(&profile).expect("profile");
    let mut env = vec!["env".to_string()];
    env.extend(
        clankie_tests::claude::provider_env(&f.model)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    // A prompt on the command line runs before the plugin's tools load:
    // the script waits for them first.
    let script = [
        r#"CALL WaitForMcpServers {}"#,
        r#"CALL message_clankie {"text": "wrapped, up"}"#,
        "SAY ok",
    ]
    .join(" ;; ");
    let clankie = clankie_tests::bin_dir().join("clankie");
    env.extend([
        "/bin/sh".into(),
        "-c".into(),
        r#""$0" claude --profile "$1" --claude "$2" -- "$3"; true"#.into(),
        clankie.display().to_string(),
        profile.display().to_string(),
        claude.display().to_string(),
        script,
    ]);
    let owner = clankie_runtime::owner::read_owner_token(&f.stack.paths().owner_credential())
        .expect("owner");
    let mut mailbox = clankie_runtime::clients::mailbox(&f.stack.paths(), Meta::owner(&owner));
    let wrapped = mailbox
        .hire(mailbox_pb::HireRequest {
            project: "alpha".into(),
            conversation_id: f.lead.clone(),
            command: env,
            harness: "claude".into(),
            harness_executable: claude.display().to_string(),
            ..Default::default()
        })
        .await
        .expect("hire")
        .into_inner();
    let screen = || f.tmux.run(&["capture-pane", "-p", "-t", &wrapped.pane_id]);
    // Its pane's report reaches the lead: the pane is a member.
    f.lead_hears("wrapped, up", Duration::from_secs(120))
        .await
        .unwrap_or_else(|| panic!("{}\n{:?}", screen(), file_lines(&f.model.log)));
    // Its seat routes are refused: the bridge's seat channel polls and
    // the mailbox refuses that seat as not the launched harness.
    let mailbox_log = f.stack.state.path().join("logs/mailbox.log");
    let refused = clankie_tests::eventually(Duration::from_secs(60), async || {
        std::fs::read_to_string(&mailbox_log)
            .ok()?
            .lines()
            .any(|l| l.contains("launcher_mismatch") && l.contains(&wrapped.hire_id))
            .then_some(())
    })
    .await;
    assert!(refused.is_some(), "{}", f.stack.log_tails(&["mailbox"], 20));
    // The hire says why it is not ready.
    let roster = clankie_tests::seat::json_of(&f.stack.clankie_ok(&["roster", "--json"]));
    let hire = roster["hires"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["hireId"] == wrapped.hire_id.as_str()))
        .cloned()
        .expect("the wrapped hire");
    assert_eq!(hire["readiness"], "failed", "{hire}");
    assert_eq!(hire["readinessReason"], "launcher_mismatch", "{hire}");
    // The lead's message to it is never claimed: no seat takes it.
    let sent = clankie_tests::seat::json_of(&f.stack.clankie_ok(&[
        "message",
        &wrapped.hire_id,
        "SAY never",
        "--conversation",
        &f.lead,
    ]));
    tokio::time::sleep(Duration::from_secs(8)).await;
    let log = file_lines(&f.model.log);
    assert!(
        !log.iter().any(|l| l.contains("SAY never")),
        "{sent}\n{log:?}"
    );
}
