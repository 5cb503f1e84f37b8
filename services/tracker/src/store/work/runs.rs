//! Runs and their control (pause, resume, cancel).

use super::*;

impl Store {
    /// Records a run of work on an issue, or updates one. A finished run
    /// keeps its status.
    pub fn save_run(
        &mut self,
        caller: &Caller,
        input: SaveRun,
    ) -> Result<Written<Run>, StoreError> {
        if let Some(s) = &input.status {
            one_of(s, RUN_STATUSES, "status")?;
        }
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "save_run", key.as_deref(), |w| {
            if let Some(id) = &input.id {
                let mut run = find_run(w, id)?;
                check_fresh(input.if_updated_at, run.updated_at, &format!("run {id}"))?;
                if let Some(issue) = &input.issue_id
                    && find_issue(w, issue)?.id != run.issue_id
                {
                    return Err(StoreError::Invalid(format!("run {id} is of another issue")));
                }
                if let Some(s) = &input.status
                    && *s != run.status
                {
                    if terminal(&run.status) {
                        return Err(StoreError::Conflict(format!(
                            "run {id} already {}",
                            run.status
                        )));
                    }
                    run.status = s.clone();
                    if terminal(s) {
                        run.paused = false;
                    }
                }
                if let Some(s) = &input.summary {
                    run.summary = s.clone();
                }
                run.updated_at = bump(w.now, run.updated_at);
                w.execute(
                    "UPDATE runs SET status = ?2, summary = ?3, paused = ?4, updated_at = ?5 WHERE id = ?1",
                    params![run.id, run.status, run.summary, run.paused, run.updated_at],
                )?;
                w.change("run", &run.id, "update")?;
                return Ok(run);
            }
            let issue = find_issue(w, required(input.issue_id.as_deref(), "issueId")?)?;
            let run = Run {
                id: new_id(),
                issue_id: issue.id,
                status: input.status.clone().unwrap_or_else(|| "queued".into()),
                summary: input.summary.clone().unwrap_or_default(),
                paused: false,
                created_by: w.actor.clone(),
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO runs (id, issue_id, status, summary, paused, created_by, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?6)",
                params![run.id, run.issue_id, run.status, run.summary, run.created_by, run.created_at],
            )?;
            w.change("run", &run.id, "create")?;
            Ok(run)
        })
    }

    /// Pauses, resumes or cancels a run (lead only).
    pub fn post_run_control(
        &mut self,
        caller: &Caller,
        input: RunControl,
    ) -> Result<Written<Run>, StoreError> {
        caller.who().require_lead("post_run_control")?;
        one_of(&input.action, RUN_ACTIONS, "action")?;
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "post_run_control", key.as_deref(), |w| {
            let mut run = find_run(w, &input.run_id)?;
            check_fresh(
                input.if_updated_at,
                run.updated_at,
                &format!("run {}", run.id),
            )?;
            if terminal(&run.status) {
                return Err(StoreError::Conflict(format!(
                    "run {} already {}; it cannot {}",
                    run.id, run.status, input.action
                )));
            }
            match input.action.as_str() {
                "pause" => run.paused = true,
                "resume" => run.paused = false,
                _ => {
                    run.status = "canceled".into();
                    run.paused = false;
                }
            }
            run.updated_at = bump(w.now, run.updated_at);
            w.execute(
                "UPDATE runs SET status = ?2, paused = ?3, updated_at = ?4 WHERE id = ?1",
                params![run.id, run.status, run.paused, run.updated_at],
            )?;
            w.change("run", &run.id, &input.action)?;
            Ok(run)
        })
    }

    /// Runs, newest first, of one issue or all, optionally of one status.
    pub fn runs(
        &self,
        issue: Option<&str>,
        status: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<Run>, StoreError> {
        let issue_id = match issue {
            Some(i) => Some(self.issue(i)?.id),
            None => None,
        };
        all(
            &self.conn,
            "SELECT * FROM runs WHERE (?1 IS NULL OR issue_id = ?1) AND (?2 IS NULL OR status = ?2)
             ORDER BY created_at DESC, rowid DESC LIMIT ?3",
            params![issue_id, status, page_limit(limit)],
            run_from_row,
        )
    }

    /// One run.
    pub fn run(&self, id: &str) -> Result<Run, StoreError> {
        find_run(&self.conn, id)
    }
}
