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

/// Landing review across harnesses: a Claude author submits its checkout's
/// change; the candidate reaches the Codex reviewer as a turn on its
/// thread; Codex reads the exact patch and approves the patch-id it read.
#[tokio::test(flavor = "multi_thread")]
async fn a_claude_authors_change_is_approved_by_a_codex_reviewer() {
    use clankie_tests::git::{commit, patch_id, work_repo};
    let dir = tempfile::tempdir().expect("dir");
    let (work, base) = work_repo(dir.path(), "work");
    commit(&work, &[("src/feature.txt", b"the feature\n")], "feature");
    let expected = patch_id(&work, &base);
    let f = ClaudeStack::start_on(dir, work.clone(), &["--reviewer"]).await;
    let review = [
        "ON Review candidate",
        r#"CALL review_candidate {"candidateId": "{{re:(cand-[0-9a-f]+)}}"}"#,
        r#"CALL review_verdict {"candidateId": "{{re:(cand-[0-9a-f]+)}}", "patchId": "{{lastre:\"patchId\":\"([0-9a-f]+)\"}}", "verdict": "approve"}"#,
        r#"CALL message_clankie {"text": "codex reviewed {{lastre:\"state\":\"([a-z]+)\"}}"}"#,
        "SAY reviewed",
    ]
    .join(" ;; ");
    let reviewer = CodexWorker::hire_as(
        &f.stack,
        f.dir.path(),
        &f.model,
        &f.lead,
        "reviewer",
        "reviewer",
        &review,
    );
    let screen = || f.tmux.run(&["capture-pane", "-p", "-t", reviewer.pane()]);
    let up = clankie_tests::eventually(Duration::from_secs(60), async || {
        screen().contains("• done").then_some(())
    })
    .await;
    assert!(up.is_some(), "{}", screen());
    let author = f.hire("author");
    f.brief(
        &author,
        &[
            &format!(
                r#"CALL submit_for_review {{"checkout": "{}", "summary": "the feature"}}"#,
                work.display()
            ),
            r#"CALL message_clankie {"text": "submitted {{lastre:\"candidateId\":\"([^\"]+)\"}}"}"#,
            "SAY submitted",
        ],
    );
    let submitted = f
        .lead_hears("submitted cand-", Duration::from_secs(120))
        .await
        .unwrap_or_else(|| panic!("{}\n{:?}", f.screen(&author), file_lines(&f.model.log)));
    let candidate = submitted["text"]
        .as_str()
        .and_then(|t| t.strip_prefix("submitted "))
        .expect("candidate")
        .to_string();
    assert!(
        f.lead_hears("codex reviewed approved", Duration::from_secs(120))
            .await
            .is_some(),
        "{}\n{:?}",
        screen(),
        file_lines(&f.model.log)
    );
    // The owner's view: approved, on the exact patch the author committed.
    let shown = clankie_tests::seat::json_of(
        &f.stack
            .clankie_ok(&["review", "show", &candidate, "--json"]),
    );
    assert_eq!(shown["state"], "approved", "{shown}");
    assert_eq!(shown["patchId"], expected.as_str(), "{shown}");
    assert!(
        shown["patch"]
            .as_str()
            .unwrap_or("")
            .contains("the feature")
    );
}

/// A harness that is missing or older than the tested releases is refused
/// with its fixed reason before any pane opens.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_or_old_harness_is_refused_before_a_pane_opens() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = ClaudeStack::start().await;
    let windows = || f.tmux.run(&["list-windows", "-a"]).lines().count();
    let before = windows();
    let old = f.dir.path().join("codex");
    std::fs::write(&old, "#!/bin/sh\necho codex-cli 0.100.0\n").expect("script");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).expect("mode");
    let hire = |harness: &str, flag: &str, bin: &str| {
        f.stack.clankie(&[
            "hire",
            "--project",
            "alpha",
            "--conversation",
            &f.lead,
            "--harness",
            harness,
            flag,
            bin,
        ])
    };
    for (out, reason) in [
        (
            hire("claude", "--claude", "/nonexistent/claude"),
            "harness_not_installed",
        ),
        (
            hire("codex", "--codex", &old.display().to_string()),
            "harness_release_unsupported",
        ),
    ] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(reason), "{err}");
    }
    assert_eq!(windows(), before, "no pane opened");
}
