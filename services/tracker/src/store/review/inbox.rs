//! The lead's inbox: items, their states, and answers to asks.

use super::*;

impl Store {
    /// The lead's inbox, oldest first: open asks, reviews ready for the
    /// owner and issues In Review. Archived, currently snoozed and answered
    /// items only with `include_resolved`.
    pub fn inbox(
        &self,
        include_resolved: bool,
        limit: Option<i64>,
    ) -> Result<Vec<InboxItem>, StoreError> {
        let conn = &self.conn;
        let mut items = Vec::new();
        let asks = all(
            conn,
            "SELECT * FROM asks WHERE ?1 OR answered_at IS NULL ORDER BY created_at",
            params![include_resolved],
            ask_from_row,
        )?;
        for a in &asks {
            items.push(ask_item(conn, a)?);
        }
        let reviews = all(
            conn,
            "SELECT * FROM guided_reviews WHERE state = 'ready' ORDER BY updated_at",
            [],
            review_from_row,
        )?;
        for r in &reviews {
            items.push(review_item(conn, r)?);
        }
        let verifying = all(
            conn,
            "SELECT * FROM issues WHERE state = 'In Review' ORDER BY updated_at",
            [],
            issue_from_row,
        )?;
        for i in &verifying {
            items.push(verify_item(conn, i)?);
        }
        let now = self.now();
        if !include_resolved {
            items.retain(|i| {
                i.state != "archived"
                    && !(i.state == "snoozed" && i.snooze_until.is_some_and(|t| t > now))
            });
        }
        items.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        items.truncate(page_limit(limit) as usize);
        Ok(items)
    }

    /// One inbox item and what it points at.
    pub fn inbox_item(&self, id: &str) -> Result<(InboxItem, InboxTarget), StoreError> {
        inbox_item(&self.conn, id)
    }

    /// Marks an inbox item read, snoozed or archived (lead only).
    pub fn save_inbox_item(
        &mut self,
        caller: &Caller,
        input: SaveInboxItem,
    ) -> Result<Written<InboxItem>, StoreError> {
        caller.who().require_lead("save_inbox_item")?;
        one_of(&input.state, INBOX_STATES, "state")?;
        let now = self.now();
        let snooze = match (input.state.as_str(), input.snooze_until) {
            ("snoozed", Some(t)) if t > now => Some(t),
            ("snoozed", _) => {
                return Err(StoreError::Invalid(
                    "snoozing needs a snoozeUntil in the future".into(),
                ));
            }
            _ => None,
        };
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "save_inbox_item", key.as_deref(), |w| {
            let (mut item, _) = inbox_item(w, &input.id)?;
            w.execute(
                "INSERT INTO inbox_items (id, state, snooze_until, updated_by, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET state = ?2, snooze_until = ?3, updated_by = ?4, updated_at = ?5",
                params![item.id, input.state, snooze, w.actor, w.now],
            )?;
            w.change("inbox_item", &item.id, &input.state)?;
            item.state = input.state.clone();
            item.snooze_until = snooze;
            Ok(item)
        })
    }

    /// Answers an ask (lead only): resolves it and records a note event on
    /// its issue.
    pub fn post_inbox_answer(
        &mut self,
        caller: &Caller,
        input: PostInboxAnswer,
    ) -> Result<Written<AskAnswer>, StoreError> {
        caller.who().require_lead("post_inbox_answer")?;
        let answer = required(Some(&input.answer), "answer")?.to_string();
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "post_inbox_answer", key.as_deref(), |w| {
            let ask_id = input.id.strip_prefix("ask:").unwrap_or(&input.id);
            let mut ask = find_ask(w, ask_id)?;
            if ask.answered_at.is_some() {
                return Err(StoreError::Conflict(format!(
                    "ask {} was already answered by {}",
                    ask.id,
                    ask.answered_by.as_deref().unwrap_or("someone")
                )));
            }
            ask.answer = Some(answer.clone());
            ask.answered_by = Some(w.actor.clone());
            ask.answered_at = Some(w.now);
            w.execute(
                "UPDATE asks SET answer = ?2, answered_by = ?3, answered_at = ?4 WHERE id = ?1",
                params![ask.id, ask.answer, ask.answered_by, ask.answered_at],
            )?;
            w.change("ask", &ask.id, "answer")?;
            let issue = find_issue(w, &ask.issue_id)?;
            let body = format!(
                "Answer to {}'s question \"{}\":\n\n{}",
                ask.asked_by, ask.question, answer
            );
            let event = insert_event(w, &issue, "note", &body, None)?;
            Ok(AskAnswer { ask, event })
        })
    }
}
