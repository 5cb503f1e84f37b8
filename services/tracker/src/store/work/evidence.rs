//! Issue events, evidence bundles with their checks, and asks.

use super::*;

impl Store {
    /// Records a work event on an issue. Only the owner's route and the
    /// lead may record `owner-verified`.
    pub fn post_issue_event(
        &mut self,
        caller: &Caller,
        input: PostIssueEvent,
    ) -> Result<Written<IssueEvent>, StoreError> {
        one_of(&input.stage, EVENT_STAGES, "stage")?;
        if input.stage == OWNER_VERIFIED
            && let Some(role) = caller.who().limited()
        {
            return Err(StoreError::NotAllowed {
                role,
                what: format!("the owner-verified stage is not available to the {role} role"),
            });
        }
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "post_issue_event", key.as_deref(), |w| {
            let issue = find_issue(w, &input.issue_id)?;
            let bundle = match non_empty(input.evidence_bundle_id.as_deref()) {
                Some(b) => {
                    let bundle = find_bundle(w, b)?;
                    if bundle.issue_id != issue.id {
                        return Err(StoreError::Invalid(format!(
                            "evidence bundle {b} belongs to another issue"
                        )));
                    }
                    Some(bundle.id)
                }
                None => None,
            };
            insert_event(
                w,
                &issue,
                &input.stage,
                input.body.as_deref().unwrap_or(""),
                bundle.as_deref(),
            )
        })
    }

    /// An issue's events, oldest first, optionally of one stage.
    pub fn issue_events(
        &self,
        issue: &str,
        stage: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<IssueEvent>, StoreError> {
        let id = self.issue(issue)?.id;
        all(
            &self.conn,
            "SELECT * FROM issue_events WHERE issue_id = ?1 AND (?2 IS NULL OR stage = ?2)
             ORDER BY created_at, rowid LIMIT ?3",
            params![id, stage, page_limit(limit)],
            event_from_row,
        )
    }

    /// Records an evidence bundle, or replaces one's summary and items.
    pub fn save_evidence_bundle(
        &mut self,
        caller: &Caller,
        input: SaveEvidenceBundle,
    ) -> Result<Written<EvidenceBundle>, StoreError> {
        if let Some(items) = &input.items {
            if items.len() > 100 {
                return Err(StoreError::Invalid(
                    "a bundle holds at most 100 items".into(),
                ));
            }
            if items
                .iter()
                .any(|i| i.kind.trim().is_empty() || i.reference.trim().is_empty())
            {
                return Err(StoreError::Invalid(
                    "every evidence item needs a kind and a ref".into(),
                ));
            }
        }
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "save_evidence_bundle", key.as_deref(), |w| {
            if let Some(id) = &input.id {
                let mut b = find_bundle(w, id)?;
                if let Some(issue) = &input.issue_id
                    && find_issue(w, issue)?.id != b.issue_id
                {
                    return Err(StoreError::Invalid(format!(
                        "evidence bundle {id} belongs to another issue"
                    )));
                }
                check_fresh(input.if_updated_at, b.updated_at, &format!("evidence bundle {id}"))?;
                if let Some(s) = &input.summary {
                    b.summary = required(Some(s), "summary")?.to_string();
                }
                if let Some(items) = &input.items {
                    b.items = items.clone();
                }
                b.updated_at = bump(w.now, b.updated_at);
                w.execute(
                    "UPDATE evidence_bundles SET summary = ?2, items = ?3, updated_at = ?4 WHERE id = ?1",
                    params![b.id, b.summary, serde_json::to_string(&b.items)?, b.updated_at],
                )?;
                w.change("evidence_bundle", &b.id, "update")?;
                return Ok(b);
            }
            let issue = find_issue(w, required(input.issue_id.as_deref(), "issueId")?)?;
            let b = EvidenceBundle {
                id: new_id(),
                issue_id: issue.id,
                summary: required(input.summary.as_deref(), "summary")?.to_string(),
                items: input.items.clone().unwrap_or_default(),
                created_by: w.actor.clone(),
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO evidence_bundles (id, issue_id, summary, items, created_by, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                params![
                    b.id,
                    b.issue_id,
                    b.summary,
                    serde_json::to_string(&b.items)?,
                    b.created_by,
                    b.created_at
                ],
            )?;
            w.change("evidence_bundle", &b.id, "create")?;
            Ok(b)
        })
    }

    /// One evidence bundle.
    pub fn evidence_bundle(&self, id: &str) -> Result<EvidenceBundle, StoreError> {
        find_bundle(&self.conn, id)
    }

    /// A bundle's checks, oldest first.
    pub fn bundle_checks(&self, bundle: &str) -> Result<Vec<BundleCheck>, StoreError> {
        all(
            &self.conn,
            "SELECT * FROM bundle_checks WHERE bundle_id = ?1 ORDER BY created_at, rowid",
            params![bundle],
            check_from_row,
        )
    }

    /// Records a check of an evidence bundle.
    pub fn post_bundle_check(
        &mut self,
        caller: &Caller,
        input: PostBundleCheck,
    ) -> Result<Written<BundleCheck>, StoreError> {
        one_of(&input.outcome, CHECK_OUTCOMES, "outcome")?;
        let name = required(Some(&input.name), "name")?.to_string();
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "post_bundle_check", key.as_deref(), |w| {
            let bundle = find_bundle(w, &input.bundle_id)?;
            let c = BundleCheck {
                id: new_id(),
                bundle_id: bundle.id,
                name,
                outcome: input.outcome.clone(),
                detail: input.detail.clone().unwrap_or_default(),
                actor: w.actor.clone(),
                created_at: w.now,
            };
            w.execute(
                "INSERT INTO bundle_checks (id, bundle_id, name, outcome, detail, actor, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![c.id, c.bundle_id, c.name, c.outcome, c.detail, c.actor, c.created_at],
            )?;
            w.change("bundle_check", &c.id, "create")?;
            Ok(c)
        })
    }

    /// Asks the lead a question about an issue (it lands in the inbox).
    pub fn post_issue_ask(
        &mut self,
        caller: &Caller,
        input: PostIssueAsk,
    ) -> Result<Written<Ask>, StoreError> {
        let question = required(Some(&input.question), "question")?.to_string();
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "post_issue_ask", key.as_deref(), |w| {
            let issue = find_issue(w, &input.issue_id)?;
            let ask = Ask {
                id: new_id(),
                issue_id: issue.id,
                question,
                asked_by: w.actor.clone(),
                created_at: w.now,
                answer: None,
                answered_by: None,
                answered_at: None,
            };
            w.execute(
                "INSERT INTO asks (id, issue_id, question, asked_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![ask.id, ask.issue_id, ask.question, ask.asked_by, ask.created_at],
            )?;
            w.change("ask", &ask.id, "create")?;
            Ok(ask)
        })
    }

    /// One ask.
    pub fn ask(&self, id: &str) -> Result<Ask, StoreError> {
        find_ask(&self.conn, id)
    }
}
