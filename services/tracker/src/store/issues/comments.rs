//! Comments on issues.

use super::*;

impl Store {
    /// Adds a comment to an issue as `actor`.
    pub fn save_comment(
        &mut self,
        actor: &str,
        issue: &str,
        body: &str,
        idempotency_key: Option<&str>,
    ) -> Result<Written<Comment>, StoreError> {
        let input = SaveComment {
            issue_id: Some(issue.into()),
            body: body.into(),
            idempotency_key: idempotency_key.map(str::to_string),
            ..Default::default()
        };
        self.save_comment_by(Writer { actor, role: None }, "save_comment", input)
    }

    /// Adds a comment, or edits one (`id`): only its author, the lead or
    /// the owner may edit a comment.
    pub fn save_comment_as(
        &mut self,
        caller: &Caller,
        tool: &str,
        input: SaveComment,
    ) -> Result<Written<Comment>, StoreError> {
        self.save_comment_by(caller.who(), tool, input)
    }

    pub(super) fn save_comment_by(
        &mut self,
        who: Writer<'_>,
        tool: &str,
        input: SaveComment,
    ) -> Result<Written<Comment>, StoreError> {
        if input.body.trim().is_empty() {
            return Err(StoreError::Invalid("a comment needs a body".into()));
        }
        let key = input.idempotency_key.clone();
        self.write(who, tool, key.as_deref(), |w| {
            if let Some(id) = &input.id {
                let mut c = one(
                    w,
                    "SELECT * FROM comments WHERE id = ?1",
                    params![id],
                    comment_from_row,
                )?
                .ok_or_else(|| StoreError::NotFound(format!("comment {id}")))?;
                who.own_only(&c.author, "editing another author's comment")?;
                if let Some(issue) = &input.issue_id
                    && find_issue(w, issue)?.id != c.issue_id
                {
                    return Err(StoreError::Invalid(format!(
                        "comment {id} is not on issue {issue}"
                    )));
                }
                check_fresh(input.if_updated_at, c.updated_at, &format!("comment {id}"))?;
                c.body = input.body.clone();
                c.updated_at = bump(w.now, c.updated_at);
                w.execute(
                    "UPDATE comments SET body = ?2, updated_at = ?3 WHERE id = ?1",
                    params![c.id, c.body, c.updated_at],
                )?;
                w.change("comment", &c.id, "update")?;
                return Ok(c);
            }
            let issue = required(input.issue_id.as_deref(), "issueId")?;
            let issue_id = find_issue(w, issue)?.id;
            let comment = Comment {
                id: new_id(),
                issue_id,
                body: input.body.clone(),
                author: w.actor.clone(),
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO comments (id, issue_id, body, author, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![
                    comment.id,
                    comment.issue_id,
                    comment.body,
                    comment.author,
                    comment.created_at
                ],
            )?;
            w.change("comment", &comment.id, "create")?;
            Ok(comment)
        })
    }

    /// Comments of an issue, oldest first.
    pub fn comments(&self, issue: &str) -> Result<Vec<Comment>, StoreError> {
        let id = self.issue(issue)?.id;
        all(
            &self.conn,
            "SELECT * FROM comments WHERE issue_id = ?1 ORDER BY created_at, id",
            params![id],
            comment_from_row,
        )
    }
}
