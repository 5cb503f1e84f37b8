//! Guided reviews (steps for the owner to walk through, with results,
//! comments and a history) and the lead's inbox.

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use super::work::{Ask, IssueEvent, ask_from_row, find_ask, find_bundle, insert_event};
use super::{
    Caller, Issue, Store, StoreError, Tx, Written, all, bump, check_fresh, find_issue,
    issue_from_row, new_id, non_empty, one, one_of, page_limit, required,
};
use crate::vocabulary::{INBOX_STATES, REVIEW_STATES, STEP_OUTCOMES};

// The store's methods for these, by kind.
mod inbox;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GuidedReview {
    pub id: String,
    pub issue_id: String,
    pub title: String,
    pub summary: String,
    /// draft, ready or retired.
    pub state: String,
    pub retired_reason: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GuidedReviewStep {
    pub id: String,
    pub review_id: String,
    pub position: i64,
    pub instruction: String,
    pub expected: String,
    pub evidence_bundle_id: Option<String>,
    /// pass, fail or skip once a result is recorded.
    pub outcome: Option<String>,
    pub note: Option<String>,
    pub result_by: Option<String>,
    pub result_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GuidedReviewComment {
    pub id: String,
    pub review_id: String,
    pub body: String,
    pub author: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GuidedReviewEvent {
    pub id: String,
    pub review_id: String,
    /// created, updated, step-added, step-updated, step-result, comment,
    /// submitted or retired.
    pub kind: String,
    pub detail: String,
    pub actor: String,
    pub created_at: i64,
}

/// One item of the lead's inbox.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    /// `ask:<ask id>`, `review:<review id>` or `verify:<issue id>`.
    pub id: String,
    /// ask, guided-review or owner-verification.
    pub kind: String,
    pub issue_id: String,
    pub identifier: String,
    /// The question, the review's title or the issue's title.
    pub title: String,
    pub created_at: i64,
    /// unread, read, snoozed or archived.
    pub state: String,
    pub snooze_until: Option<i64>,
    /// An answered ask.
    pub resolved: bool,
}

/// What an inbox item points at.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum InboxTarget {
    Ask(Ask),
    Review(GuidedReview),
    Issue(Issue),
}

/// `post_inbox_answer`'s result: the resolved ask and the note event
/// recorded on its issue.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AskAnswer {
    pub ask: Ask,
    pub event: IssueEvent,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveGuidedReview {
    pub issue_id: String,
    pub id: Option<String>,
    pub title: String,
    pub summary: Option<String>,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveGuidedReviewStep {
    pub review_id: String,
    pub step_id: Option<String>,
    pub instruction: String,
    pub expected: Option<String>,
    pub evidence_bundle_id: Option<String>,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PostStepResult {
    pub review_id: String,
    pub step_id: String,
    pub outcome: String,
    pub note: Option<String>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PostReviewComment {
    pub review_id: String,
    pub body: String,
    pub idempotency_key: Option<String>,
}

/// `post_guided_review_submit` input.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewRef {
    pub review_id: String,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetireReview {
    pub review_id: String,
    pub reason: String,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveInboxItem {
    pub id: String,
    pub state: String,
    pub snooze_until: Option<i64>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PostInboxAnswer {
    pub id: String,
    pub answer: String,
    pub idempotency_key: Option<String>,
}

fn review_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GuidedReview> {
    Ok(GuidedReview {
        id: r.get("id")?,
        issue_id: r.get("issue_id")?,
        title: r.get("title")?,
        summary: r.get("summary")?,
        state: r.get("state")?,
        retired_reason: r.get("retired_reason")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn step_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GuidedReviewStep> {
    Ok(GuidedReviewStep {
        id: r.get("id")?,
        review_id: r.get("review_id")?,
        position: r.get("position")?,
        instruction: r.get("instruction")?,
        expected: r.get("expected")?,
        evidence_bundle_id: r.get("evidence_bundle_id")?,
        outcome: r.get("outcome")?,
        note: r.get("note")?,
        result_by: r.get("result_by")?,
        result_at: r.get("result_at")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn review_comment_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GuidedReviewComment> {
    Ok(GuidedReviewComment {
        id: r.get("id")?,
        review_id: r.get("review_id")?,
        body: r.get("body")?,
        author: r.get("author")?,
        created_at: r.get("created_at")?,
    })
}

fn review_event_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<GuidedReviewEvent> {
    Ok(GuidedReviewEvent {
        id: r.get("id")?,
        review_id: r.get("review_id")?,
        kind: r.get("kind")?,
        detail: r.get("detail")?,
        actor: r.get("actor")?,
        created_at: r.get("created_at")?,
    })
}

fn find_review(conn: &Connection, id: &str) -> Result<GuidedReview, StoreError> {
    one(
        conn,
        "SELECT * FROM guided_reviews WHERE id = ?1",
        params![id],
        review_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("guided review {id}")))
}

fn find_step(conn: &Connection, review: &str, id: &str) -> Result<GuidedReviewStep, StoreError> {
    one(
        conn,
        "SELECT * FROM guided_review_steps WHERE id = ?1 AND review_id = ?2",
        params![id, review],
        step_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("step {id} of guided review {review}")))
}

/// A review that can still change.
fn open_review(conn: &Connection, id: &str) -> Result<GuidedReview, StoreError> {
    let review = find_review(conn, id)?;
    if review.state == "retired" {
        return Err(StoreError::Conflict(format!(
            "guided review {id} is retired"
        )));
    }
    Ok(review)
}

/// Appends to a review's history.
fn review_event(
    w: &mut Tx<'_>,
    review: &GuidedReview,
    kind: &str,
    detail: &str,
) -> Result<(), StoreError> {
    let id = new_id();
    w.execute(
        "INSERT INTO guided_review_events (id, review_id, kind, detail, actor, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![id, review.id, kind, detail, w.actor, w.now],
    )?;
    Ok(())
}

/// Moves a review's `updatedAt` on when its steps or comments change.
fn touch_review(w: &mut Tx<'_>, review: &mut GuidedReview) -> Result<(), StoreError> {
    review.updated_at = bump(w.now, review.updated_at);
    w.execute(
        "UPDATE guided_reviews SET updated_at = ?2 WHERE id = ?1",
        params![review.id, review.updated_at],
    )?;
    Ok(())
}

fn step_bundle(
    w: &Tx<'_>,
    review: &GuidedReview,
    bundle: Option<&str>,
) -> Result<Option<String>, StoreError> {
    match non_empty(bundle) {
        None => Ok(None),
        Some(b) => {
            let bundle = find_bundle(w, b)?;
            if bundle.issue_id != review.issue_id {
                return Err(StoreError::Invalid(format!(
                    "evidence bundle {b} belongs to another issue"
                )));
            }
            Ok(Some(bundle.id))
        }
    }
}

/// Splits an inbox item id into its kind and target id. A bare id is
/// looked up as an ask, a review, then an issue.
fn parse_item(conn: &Connection, id: &str) -> Result<(&'static str, String), StoreError> {
    if let Some(rest) = id.strip_prefix("ask:") {
        return Ok(("ask", rest.to_string()));
    }
    if let Some(rest) = id.strip_prefix("review:") {
        return Ok(("review", rest.to_string()));
    }
    if let Some(rest) = id.strip_prefix("verify:") {
        return Ok(("verify", rest.to_string()));
    }
    if find_ask(conn, id).is_ok() {
        return Ok(("ask", id.to_string()));
    }
    if find_review(conn, id).is_ok() {
        return Ok(("review", id.to_string()));
    }
    let issue = find_issue(conn, id)?;
    Ok(("verify", issue.id))
}

/// The stored (state, snoozeUntil) of an inbox item.
fn item_state(conn: &Connection, id: &str) -> Result<(String, Option<i64>), StoreError> {
    Ok(one(
        conn,
        "SELECT state, snooze_until FROM inbox_items WHERE id = ?1",
        params![id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?
    .unwrap_or_else(|| ("unread".into(), None)))
}

fn ask_item(conn: &Connection, ask: &Ask) -> Result<InboxItem, StoreError> {
    let issue = find_issue(conn, &ask.issue_id)?;
    let id = format!("ask:{}", ask.id);
    let (state, snooze_until) = item_state(conn, &id)?;
    Ok(InboxItem {
        id,
        kind: "ask".into(),
        issue_id: issue.id,
        identifier: issue.identifier,
        title: ask.question.clone(),
        created_at: ask.created_at,
        state,
        snooze_until,
        resolved: ask.answered_at.is_some(),
    })
}

fn review_item(conn: &Connection, review: &GuidedReview) -> Result<InboxItem, StoreError> {
    let issue = find_issue(conn, &review.issue_id)?;
    let id = format!("review:{}", review.id);
    let (state, snooze_until) = item_state(conn, &id)?;
    Ok(InboxItem {
        id,
        kind: "guided-review".into(),
        issue_id: issue.id,
        identifier: issue.identifier,
        title: review.title.clone(),
        created_at: review.updated_at,
        state,
        snooze_until,
        resolved: review.state != "ready",
    })
}

fn verify_item(conn: &Connection, issue: &Issue) -> Result<InboxItem, StoreError> {
    let id = format!("verify:{}", issue.id);
    let (state, snooze_until) = item_state(conn, &id)?;
    Ok(InboxItem {
        id,
        kind: "owner-verification".into(),
        issue_id: issue.id.clone(),
        identifier: issue.identifier.clone(),
        title: issue.title.clone(),
        created_at: issue.updated_at,
        state,
        snooze_until,
        resolved: issue.state != "In Review",
    })
}

/// One inbox item and its target.
fn inbox_item(conn: &Connection, id: &str) -> Result<(InboxItem, InboxTarget), StoreError> {
    let (kind, target) = parse_item(conn, id)?;
    match kind {
        "ask" => {
            let ask = find_ask(conn, &target)?;
            Ok((ask_item(conn, &ask)?, InboxTarget::Ask(ask)))
        }
        "review" => {
            let review = find_review(conn, &target)?;
            if review.state == "draft" {
                return Err(StoreError::NotFound(format!(
                    "inbox item {id}: the guided review is still a draft"
                )));
            }
            Ok((review_item(conn, &review)?, InboxTarget::Review(review)))
        }
        _ => {
            let issue = find_issue(conn, &target)?;
            Ok((verify_item(conn, &issue)?, InboxTarget::Issue(issue)))
        }
    }
}

impl Store {
    /// Starts a guided review of an issue (a draft), or updates its title
    /// and summary.
    pub fn save_guided_review(
        &mut self,
        caller: &Caller,
        input: SaveGuidedReview,
    ) -> Result<Written<GuidedReview>, StoreError> {
        let title = required(Some(&input.title), "title")?.to_string();
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "save_guided_review", key.as_deref(), |w| {
            let issue = find_issue(w, &input.issue_id)?;
            if let Some(id) = &input.id {
                let mut r = open_review(w, id)?;
                if r.issue_id != issue.id {
                    return Err(StoreError::Invalid(format!(
                        "guided review {id} is of another issue"
                    )));
                }
                check_fresh(input.if_updated_at, r.updated_at, &format!("guided review {id}"))?;
                r.title = title;
                if let Some(s) = &input.summary {
                    r.summary = s.clone();
                }
                r.updated_at = bump(w.now, r.updated_at);
                w.execute(
                    "UPDATE guided_reviews SET title = ?2, summary = ?3, updated_at = ?4 WHERE id = ?1",
                    params![r.id, r.title, r.summary, r.updated_at],
                )?;
                w.change("guided_review", &r.id, "update")?;
                review_event(w, &r, "updated", "")?;
                return Ok(r);
            }
            let r = GuidedReview {
                id: new_id(),
                issue_id: issue.id,
                title,
                summary: input.summary.clone().unwrap_or_default(),
                state: "draft".into(),
                retired_reason: None,
                created_by: w.actor.clone(),
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO guided_reviews (id, issue_id, title, summary, state, created_by, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                params![r.id, r.issue_id, r.title, r.summary, r.state, r.created_by, r.created_at],
            )?;
            w.change("guided_review", &r.id, "create")?;
            review_event(w, &r, "created", &r.title)?;
            Ok(r)
        })
    }

    /// One guided review.
    pub fn guided_review(&self, id: &str) -> Result<GuidedReview, StoreError> {
        find_review(&self.conn, id)
    }

    /// Guided reviews, newest first.
    pub fn guided_reviews(
        &self,
        issue: Option<&str>,
        state: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<GuidedReview>, StoreError> {
        if let Some(s) = state {
            one_of(s, REVIEW_STATES, "state")?;
        }
        let issue_id = match issue {
            Some(i) => Some(self.issue(i)?.id),
            None => None,
        };
        all(
            &self.conn,
            "SELECT * FROM guided_reviews WHERE (?1 IS NULL OR issue_id = ?1) AND (?2 IS NULL OR state = ?2)
             ORDER BY created_at DESC, rowid DESC LIMIT ?3",
            params![issue_id, state, page_limit(limit)],
            review_from_row,
        )
    }

    /// Adds a step to a review, or edits one.
    pub fn save_guided_review_step(
        &mut self,
        caller: &Caller,
        input: SaveGuidedReviewStep,
    ) -> Result<Written<GuidedReviewStep>, StoreError> {
        let instruction = required(Some(&input.instruction), "instruction")?.to_string();
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "save_guided_review_step", key.as_deref(), |w| {
            let mut review = open_review(w, &input.review_id)?;
            touch_review(w, &mut review)?;
            if let Some(id) = &input.step_id {
                let mut s = find_step(w, &review.id, id)?;
                check_fresh(input.if_updated_at, s.updated_at, &format!("step {id}"))?;
                s.instruction = instruction;
                if let Some(e) = &input.expected {
                    s.expected = e.clone();
                }
                if input.evidence_bundle_id.is_some() {
                    s.evidence_bundle_id =
                        step_bundle(w, &review, input.evidence_bundle_id.as_deref())?;
                }
                s.updated_at = bump(w.now, s.updated_at);
                w.execute(
                    "UPDATE guided_review_steps SET instruction = ?2, expected = ?3, evidence_bundle_id = ?4,
                         updated_at = ?5 WHERE id = ?1",
                    params![s.id, s.instruction, s.expected, s.evidence_bundle_id, s.updated_at],
                )?;
                w.change("guided_review_step", &s.id, "update")?;
                review_event(w, &review, "step-updated", &format!("step {}", s.position))?;
                return Ok(s);
            }
            let position: i64 = w.query_row(
                "SELECT COALESCE(MAX(position), 0) + 1 FROM guided_review_steps WHERE review_id = ?1",
                params![review.id],
                |r| r.get(0),
            )?;
            let s = GuidedReviewStep {
                id: new_id(),
                review_id: review.id.clone(),
                position,
                instruction,
                expected: input.expected.clone().unwrap_or_default(),
                evidence_bundle_id: step_bundle(w, &review, input.evidence_bundle_id.as_deref())?,
                outcome: None,
                note: None,
                result_by: None,
                result_at: None,
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO guided_review_steps (id, review_id, position, instruction, expected,
                     evidence_bundle_id, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                params![
                    s.id,
                    s.review_id,
                    s.position,
                    s.instruction,
                    s.expected,
                    s.evidence_bundle_id,
                    s.created_at
                ],
            )?;
            w.change("guided_review_step", &s.id, "create")?;
            review_event(w, &review, "step-added", &format!("step {position}"))?;
            Ok(s)
        })
    }

    /// A review's steps in order.
    pub fn guided_review_steps(&self, review: &str) -> Result<Vec<GuidedReviewStep>, StoreError> {
        let review = find_review(&self.conn, review)?;
        all(
            &self.conn,
            "SELECT * FROM guided_review_steps WHERE review_id = ?1 ORDER BY position",
            params![review.id],
            step_from_row,
        )
    }

    /// Records the outcome of one step.
    pub fn post_guided_review_step_result(
        &mut self,
        caller: &Caller,
        input: PostStepResult,
    ) -> Result<Written<GuidedReviewStep>, StoreError> {
        one_of(&input.outcome, STEP_OUTCOMES, "outcome")?;
        let key = input.idempotency_key.clone();
        self.write(
            caller.who(),
            "post_guided_review_step_result",
            key.as_deref(),
            |w| {
                let mut review = open_review(w, &input.review_id)?;
                touch_review(w, &mut review)?;
                let mut s = find_step(w, &review.id, &input.step_id)?;
                s.outcome = Some(input.outcome.clone());
                s.note = non_empty(input.note.as_deref()).map(str::to_string);
                s.result_by = Some(w.actor.clone());
                s.result_at = Some(w.now);
                s.updated_at = bump(w.now, s.updated_at);
                w.execute(
                    "UPDATE guided_review_steps SET outcome = ?2, note = ?3, result_by = ?4, result_at = ?5,
                         updated_at = ?6 WHERE id = ?1",
                    params![s.id, s.outcome, s.note, s.result_by, s.result_at, s.updated_at],
                )?;
                w.change("guided_review_step", &s.id, "result")?;
                review_event(
                    w,
                    &review,
                    "step-result",
                    &format!("step {}: {}", s.position, input.outcome),
                )?;
                Ok(s)
            },
        )
    }

    /// Comments on a review.
    pub fn post_guided_review_comment(
        &mut self,
        caller: &Caller,
        input: PostReviewComment,
    ) -> Result<Written<GuidedReviewComment>, StoreError> {
        let body = required(Some(&input.body), "body")?.to_string();
        let key = input.idempotency_key.clone();
        self.write(
            caller.who(),
            "post_guided_review_comment",
            key.as_deref(),
            |w| {
                let mut review = find_review(w, &input.review_id)?;
                touch_review(w, &mut review)?;
                let c = GuidedReviewComment {
                    id: new_id(),
                    review_id: review.id.clone(),
                    body,
                    author: w.actor.clone(),
                    created_at: w.now,
                };
                w.execute(
                    "INSERT INTO guided_review_comments (id, review_id, body, author, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![c.id, c.review_id, c.body, c.author, c.created_at],
                )?;
                w.change("guided_review_comment", &c.id, "create")?;
                review_event(w, &review, "comment", "")?;
                Ok(c)
            },
        )
    }

    /// A review's comments, oldest first.
    pub fn guided_review_comments(
        &self,
        review: &str,
    ) -> Result<Vec<GuidedReviewComment>, StoreError> {
        let review = find_review(&self.conn, review)?;
        all(
            &self.conn,
            "SELECT * FROM guided_review_comments WHERE review_id = ?1 ORDER BY created_at, rowid",
            params![review.id],
            review_comment_from_row,
        )
    }

    /// Submits a draft review (it needs a step): it becomes ready.
    pub fn post_guided_review_submit(
        &mut self,
        caller: &Caller,
        input: ReviewRef,
    ) -> Result<Written<GuidedReview>, StoreError> {
        let key = input.idempotency_key.clone();
        self.write(
            caller.who(),
            "post_guided_review_submit",
            key.as_deref(),
            |w| {
                let mut r = find_review(w, &input.review_id)?;
                if r.state != "draft" {
                    return Err(StoreError::Conflict(format!(
                        "guided review {} is {}, not a draft",
                        r.id, r.state
                    )));
                }
                let steps: i64 = w.query_row(
                    "SELECT COUNT(*) FROM guided_review_steps WHERE review_id = ?1",
                    params![r.id],
                    |row| row.get(0),
                )?;
                if steps == 0 {
                    return Err(StoreError::Invalid(format!(
                        "guided review {} has no steps to walk through",
                        r.id
                    )));
                }
                r.state = "ready".into();
                r.updated_at = bump(w.now, r.updated_at);
                w.execute(
                    "UPDATE guided_reviews SET state = 'ready', updated_at = ?2 WHERE id = ?1",
                    params![r.id, r.updated_at],
                )?;
                w.change("guided_review", &r.id, "submit")?;
                review_event(w, &r, "submitted", "")?;
                Ok(r)
            },
        )
    }

    /// Retires a review with a reason (lead only).
    pub fn post_retire_guided_review(
        &mut self,
        caller: &Caller,
        input: RetireReview,
    ) -> Result<Written<GuidedReview>, StoreError> {
        caller.who().require_lead("post_retire_guided_review")?;
        let reason = required(Some(&input.reason), "reason")?.to_string();
        let key = input.idempotency_key.clone();
        self.write(
            caller.who(),
            "post_retire_guided_review",
            key.as_deref(),
            |w| {
                let mut r = open_review(w, &input.review_id)?;
                r.state = "retired".into();
                r.retired_reason = Some(reason.clone());
                r.updated_at = bump(w.now, r.updated_at);
                w.execute(
                    "UPDATE guided_reviews SET state = 'retired', retired_reason = ?2, updated_at = ?3
                     WHERE id = ?1",
                    params![r.id, reason, r.updated_at],
                )?;
                w.change("guided_review", &r.id, "retire")?;
                review_event(w, &r, "retired", &reason)?;
                Ok(r)
            },
        )
    }

    /// A review's history, oldest first.
    pub fn guided_review_events(&self, review: &str) -> Result<Vec<GuidedReviewEvent>, StoreError> {
        let review = find_review(&self.conn, review)?;
        all(
            &self.conn,
            "SELECT * FROM guided_review_events WHERE review_id = ?1 ORDER BY seq",
            params![review.id],
            review_event_from_row,
        )
    }
}
