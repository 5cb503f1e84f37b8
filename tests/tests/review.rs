//! Landing review end to end: a seat in a real tmux pane submits its
//! checkout's change through the real bridge, the mailbox routes the exact
//! patch to the reviewer seat, and the owner lists and shows the candidates.

use clankie_tests::git::{commit, git, patch_id, work_repo};
use clankie_tests::seat::{Seat, json_of};
use clankie_tests::{Stack, TmuxServer};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn landing_review_routes_the_exact_change_to_the_reviewer() {
    let stack = Stack::start().await.expect("stack");
    let tmux = TmuxServer::start("work");
    let socket = tmux.socket.display().to_string();
    stack.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    // A real repository with a bare origin; the work is one commit ahead.
    let repos = tempfile::tempdir().expect("repos");
    let (work, base) = work_repo(repos.path(), "work");
    let head = commit(
        &work,
        &[
            ("src/feature.txt", b"the feature\n"),
            ("src/blob.bin", &[0u8, 159, 146, 150, 255]),
        ],
        "feature",
    );
    let expected_patch_id = patch_id(&work, &base);

    stack.clankie_ok(&[
        "project",
        "add",
        "alpha",
        "--workspace",
        &work.display().to_string(),
        "--reviewer",
    ]);
    let lead = stack.add_lead("Lead");
    let dir = tempfile::tempdir().expect("dir");
    let author = Seat::hire(&stack, dir.path(), "author", &lead).await;
    let reviewer = Seat::hire_as(&stack, dir.path(), "reviewer", &lead, "reviewer").await;
    let tools = author.run(json!({ "list": true })).await;
    for t in ["submit_for_review", "review_candidate", "review_verdict"] {
        assert!(
            tools["tools"]
                .as_array()
                .is_some_and(|l| l.contains(&json!(t))),
            "{tools}"
        );
    }
    // The catalog says why: it was served with reviews on.
    assert_eq!(
        tools["meta"]["clankie/settings"]["reviews"], "on",
        "{tools}"
    );

    // Refused with nothing stored: relative, missing and non-git checkouts.
    let not_git = tempfile::tempdir().expect("plain");
    for checkout in [
        "work".to_string(),
        repos.path().join("missing").display().to_string(),
        not_git.path().display().to_string(),
    ] {
        let r = author
            .call(
                "submit_for_review",
                json!({ "checkout": checkout, "summary": "x" }),
            )
            .await;
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(r["result"]["error"]["code"], "invalid_argument", "{r}");
    }
    let listed = json_of(&stack.clankie_ok(&["review", "list", "--json"]));
    assert_eq!(listed["candidates"].as_array().map(Vec::len), Some(0));

    // A folder inside the checkout resolves to its work-tree root.
    let sub = work.join("src").display().to_string();
    let r = author
        .call(
            "submit_for_review",
            json!({ "checkout": sub, "summary": "add the feature", "issue": "LOCAL-1" }),
        )
        .await;
    assert_eq!(r["isError"], false, "{r}");
    let c = &r["result"];
    assert_eq!(c["checkout"], work.display().to_string());
    assert_eq!(c["head"], head.as_str());
    assert_eq!(c["base"], base.as_str());
    assert_eq!(c["patchId"], expected_patch_id.as_str());
    assert_eq!(c["reviewerSeat"], reviewer.seat_id().as_str());
    let first = c["candidateId"].as_str().expect("id").to_string();
    reviewer.wait_inbox_containing(&first).await;

    // The reviewer reads the exact patch; the author cannot decide; the
    // verdict must name the patch read; CHANGES needs a finding.
    let read = reviewer
        .call("review_candidate", json!({ "candidateId": first }))
        .await;
    assert!(
        read["result"]["patch"]
            .as_str()
            .unwrap_or("")
            .contains("the feature"),
        "{read}"
    );
    assert!(
        read["result"]["patch"]
            .as_str()
            .unwrap_or("")
            .contains("GIT binary patch"),
        "{read}"
    );
    let own = author
        .call(
            "review_verdict",
            json!({ "candidateId": first, "patchId": expected_patch_id, "verdict": "approve" }),
        )
        .await;
    assert_eq!(own["result"]["error"]["code"], "not_reviewer", "{own}");
    let wrong = reviewer
        .call(
            "review_verdict",
            json!({ "candidateId": first, "patchId": "0".repeat(40), "verdict": "approve" }),
        )
        .await;
    assert_eq!(
        wrong["result"]["error"]["code"], "patch_mismatch",
        "{wrong}"
    );
    let bare = reviewer
        .call(
            "review_verdict",
            json!({ "candidateId": first, "patchId": expected_patch_id, "verdict": "changes" }),
        )
        .await;
    assert_eq!(
        bare["result"]["error"]["code"], "invalid_argument",
        "{bare}"
    );
    let changes = reviewer
        .call(
            "review_verdict",
            json!({
                "candidateId": first, "patchId": expected_patch_id, "verdict": "changes",
                "findings": [{ "text": "feature.txt lacks a trailing summary", "file": "src/feature.txt", "line": 1 }]
            }),
        )
        .await;
    assert_eq!(changes["result"]["state"], "changes", "{changes}");
    author.wait_inbox_containing("changes").await;

    // A new commit for the same issue links to the candidate that got CHANGES.
    std::fs::write(work.join("src/feature.txt"), "the feature\nsummary\n").expect("write");
    git(&work, &["commit", "-q", "-am", "address review"]);
    let second_patch = patch_id(&work, &base);
    let r = author
        .call(
            "submit_for_review",
            json!({ "checkout": work.display().to_string(), "summary": "again", "issue": "LOCAL-1" }),
        )
        .await;
    assert_eq!(r["result"]["previous"], first.as_str(), "{r}");
    let second = r["result"]["candidateId"].as_str().expect("id").to_string();
    let ok = reviewer
        .call(
            "review_verdict",
            json!({ "candidateId": second, "patchId": second_patch, "verdict": "approve" }),
        )
        .await;
    assert_eq!(ok["result"]["state"], "approved", "{ok}");
    let shown = json_of(&stack.clankie_ok(&["review", "show", &second, "--json"]));
    assert_eq!(shown["state"], "approved");
    assert!(shown["patch"].as_str().unwrap_or("").contains("summary"));
    // Without --json: the same candidate as text, one line per candidate
    // in the list, the patch after the finding lines in the show.
    let listed = stack.clankie_ok(&["review", "list"]);
    let line = listed
        .lines()
        .find(|l| l.starts_with(second.as_str()))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains("approved"), "{listed}");
    assert!(!listed.contains('{'), "{listed}");
    let shown = stack.clankie_ok(&["review", "show", &second]);
    assert!(shown.contains("diff --git"), "{shown}");
    assert!(shown.contains(&second_patch), "{shown}");
}
