//! A fleet of real Claude Code and Codex workers together, against the
//! scripted model: peer messages between them with honest receipts.

use std::time::Duration;

use clankie_tests::claude::ClaudeStack;
use clankie_tests::codex::CodexWorker;
use clankie_tests::file_lines;

/// A Codex seat finds a Claude seat in `list_fleet_seats` and messages it;
/// the message reaches the running Claude session through its channel, and
/// Claude acts on it. Asked again under the same receipt id, Codex reads
/// the original's receipt: delivered, never sent twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_codex_seat_messages_a_claude_seat_with_an_honest_receipt() {
    let f = ClaudeStack::start().await;
    let claude = f.hire("a");
    f.brief(
        &claude,
        &[r#"CALL message_clankie {"text": "claude ready"}"#, "SAY ok"],
    );
    assert!(
        f.lead_hears("claude ready", Duration::from_secs(120))
            .await
            .is_some(),
        "{}",
        f.screen(&claude)
    );
    let seat = format!(
        r#"{{{{lastre:\"hireId\":\"{}\"[^}}]*\"seatId\":\"([^\"]+)\"}}}}"#,
        claude.hire_id()
    );
    let send = format!(
        r#"CALL message_peer {{"seat": "{seat}", "receiptId": "peer-k1", "text": "from codex\nCALL message_clankie {{\"text\": \"claude heard codex\"}}\nSAY ok"}}"#
    );
    let codex = CodexWorker::hire(
        &f.stack,
        f.dir.path(),
        &f.model,
        &f.lead,
        "b",
        &format!("CALL list_fleet_seats {{}} ;; {send} ;; SAY sent"),
    );
    let screen = || f.tmux.run(&["capture-pane", "-p", "-t", codex.pane()]);
    assert!(
        f.lead_hears("claude heard codex", Duration::from_secs(120))
            .await
            .is_some(),
        "{}\n{}\n{:?}",
        screen(),
        f.screen(&claude),
        file_lines(&f.model.log)
    );
    // Codex asks again under the same receipt id: the original answers.
    f.stack.clankie_ok(&[
        "message",
        codex.hire_id(),
        &format!(
            "{send}\nCALL message_clankie {{\"text\": \"codex receipt {{{{lastre:\\\"state\\\":\\\"([a-z_]+)\\\"}}}} {{{{lastre:\\\"original\\\":(true|false)}}}}\"}}\nSAY ok"
        ),
        "--conversation",
        &f.lead,
    ]);
    let receipt = f
        .lead_hears("codex receipt", Duration::from_secs(90))
        .await
        .unwrap_or_else(|| panic!("{}\n{:?}", screen(), file_lines(&f.model.log)));
    assert_eq!(receipt["text"], "codex receipt delivered true", "{receipt}");
    // Claude heard the message exactly once.
    let heard = clankie_tests::pi::transcript(&f.stack, &f.lead)
        .into_iter()
        .filter(|e| e["text"] == "claude heard codex")
        .count();
    assert_eq!(heard, 1);
}
