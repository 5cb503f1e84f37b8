//! Guided reviews.

use super::*;

pub(super) fn review_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "save_guided_review",
            UPDATE,
            "Start a guided review of an issue (a draft of steps for the owner to walk through) or update its title and summary (id).\n\
             Returns {review: {id, issueId, title, summary, state, retiredReason, createdBy, createdAt, updatedAt}, replayed}.",
            vec![
                req("issueId", issue_ref("The issue under review.")),
                opt(
                    "id",
                    string("The review to update; leave out to start one."),
                ),
                req("title", text("Title.", 500)),
                opt("summary", clearable("What the review covers, in Markdown.")),
            ],
        ),
        tool(
            "get_guided_review",
            READ,
            "Get one guided review with its steps.\nReturns {review, steps}.",
            vec![req("id", string("Review id."))],
        ),
        tool(
            "list_guided_reviews",
            READ,
            "List guided reviews, newest first.\nReturns {reviews}.",
            vec![
                opt("issueId", issue_ref("Only reviews of this issue.")),
                opt(
                    "state",
                    one_of("Only reviews in this state.", REVIEW_STATES),
                ),
                limit(),
            ],
        ),
        tool(
            "save_guided_review_step",
            UPDATE,
            "Add a step to a guided review, or edit one (stepId).\n\
             Returns {step: {id, reviewId, position, instruction, expected, evidenceBundleId, outcome, note, resultBy, resultAt}, replayed}.",
            vec![
                review_id(),
                opt("stepId", string("The step to edit; leave out to add one.")),
                req("instruction", text("What the reviewer does.", 10_000)),
                opt("expected", clearable("What the reviewer should see.")),
                opt(
                    "evidenceBundleId",
                    clearable("An evidence bundle for this step; empty to clear."),
                ),
            ],
        ),
        tool(
            "list_guided_review_steps",
            READ,
            "List a guided review's steps in order.\nReturns {steps}.",
            vec![review_id()],
        ),
        tool(
            "post_guided_review_step_result",
            WRITE,
            "Record the outcome of one guided review step: pass, fail or skip.\nReturns {step, replayed}.",
            vec![
                review_id(),
                req("stepId", string("The step.")),
                req("outcome", one_of("The outcome.", STEP_OUTCOMES)),
                opt("note", clearable("What was seen.")),
            ],
        ),
        tool(
            "post_guided_review_comment",
            WRITE,
            "Comment on a guided review.\n\
             Returns {comment: {id, reviewId, body, author, createdAt}, replayed}.",
            vec![review_id(), req("body", text("Markdown body.", 65_536))],
        ),
        tool(
            "list_guided_review_comments",
            READ,
            "List a guided review's comments, oldest first.\nReturns {comments}.",
            vec![review_id()],
        ),
        tool(
            "post_guided_review_submit",
            WRITE,
            "Submit a draft guided review (it needs a step): it becomes ready and lands in the lead's inbox.\n\
             Returns {review, replayed}.",
            vec![review_id()],
        ),
        tool(
            "list_guided_review_events",
            READ,
            "List a guided review's history, oldest first: created, updated, step-added, step-updated, step-result, comment, submitted, retired.\n\
             Returns {events: [{id, reviewId, kind, detail, actor, createdAt}]}.",
            vec![review_id()],
        ),
        tool(
            "post_retire_guided_review",
            WRITE | LEAD,
            "Retire a guided review with a reason (lead only).\nReturns {review, replayed}.",
            vec![
                review_id(),
                req("reason", text("Why it is retired.", 10_000)),
            ],
        ),
    ]
}
