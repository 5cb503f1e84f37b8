//! Teams, issues and comments: creation, cut-over and import from Linear,
//! queries, and the saves with their optimistic concurrency.

use super::*;

// The store's methods for these, by kind.
mod comments;
mod teams;

pub(super) fn issue_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Issue> {
    let labels: String = r.get("labels")?;
    Ok(Issue {
        id: r.get("id")?,
        identifier: r.get("identifier")?,
        team_id: r.get("team_id")?,
        title: r.get("title")?,
        description: r.get("description")?,
        state: r.get("state")?,
        state_type: r.get("state_type")?,
        priority: r.get("priority")?,
        assignee: r.get("assignee")?,
        labels: json_list(&labels),
        parent_id: r.get("parent_id")?,
        cycle: r.get("cycle")?,
        milestone: r.get("milestone")?,
        project_id: r.get("project_id")?,
        linear_id: r.get("linear_id")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

pub(super) fn team_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Team> {
    Ok(Team {
        id: r.get("id")?,
        key: r.get("key")?,
        name: r.get("name")?,
        cut_over: r.get("cut_over")?,
    })
}

pub(super) fn comment_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Comment> {
    Ok(Comment {
        id: r.get("id")?,
        issue_id: r.get("issue_id")?,
        body: r.get("body")?,
        author: r.get("author")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

/// An issue by id, identifier (any case) or Linear UUID.
pub(super) fn find_issue(conn: &Connection, reference: &str) -> Result<Issue, StoreError> {
    one(
        conn,
        "SELECT * FROM issues WHERE id = ?1 OR identifier = upper(?1) OR linear_id = ?1 LIMIT 1",
        params![reference],
        issue_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("issue {reference}")))
}

/// A team by key (any case), id or name (any case).
pub(super) fn find_team(conn: &Connection, reference: &str) -> Result<Team, StoreError> {
    one(
        conn,
        "SELECT * FROM teams WHERE key = upper(?1) OR id = ?1 OR lower(name) = lower(?1)
         ORDER BY key = upper(?1) DESC, id = ?1 DESC LIMIT 1",
        params![reference],
        team_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("team {reference}")))
}

pub(super) fn valid_team_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty()
        || key.len() > 16
        || !key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(StoreError::Invalid(
            "a team key is 1-16 uppercase letters, digits or '-'".into(),
        ));
    }
    if key.starts_with("LOCAL-") {
        // LOCAL-TEAM-n belongs to cut-over teams' local issues.
        return Err(StoreError::Invalid(
            "a team key cannot start with LOCAL- (cut-over teams' local issues use it)".into(),
        ));
    }
    Ok(())
}

pub(super) fn resolve_state(name: Option<&str>) -> Result<(String, String), StoreError> {
    let name = name.unwrap_or("Backlog");
    state_type(name)
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .ok_or_else(|| StoreError::Invalid(format!("unknown state {name}")))
}

pub(super) fn insert_issue(w: &Tx<'_>, issue: &Issue, number: i64) -> Result<(), StoreError> {
    w.execute(
        "INSERT INTO issues (id, team_id, number, identifier, title, description, state, state_type,
             priority, assignee, labels, parent_id, cycle, milestone, created_by, created_at, updated_at,
             project_id, linear_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
        params![
            issue.id,
            issue.team_id,
            number,
            issue.identifier,
            issue.title,
            issue.description,
            issue.state,
            issue.state_type,
            issue.priority,
            issue.assignee,
            serde_json::to_string(&issue.labels)?,
            issue.parent_id,
            issue.cycle,
            issue.milestone,
            issue.created_by,
            issue.created_at,
            issue.updated_at,
            issue.project_id,
            issue.linear_id
        ],
    )?;
    Ok(())
}

/// Labels without blanks or case-insensitive repeats, in order.
pub(super) fn clean_labels(labels: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in labels {
        let l = l.trim();
        if !l.is_empty() && !out.iter().any(|o| o.eq_ignore_ascii_case(l)) {
            out.push(l.to_string());
        }
    }
    out
}

/// The optional references of a save: parent, project, cycle, milestone
/// and assignee, resolved against the store ("" clears).
pub(super) fn apply_refs(
    w: &Tx<'_>,
    issue: &mut Issue,
    input: &SaveIssue,
) -> Result<(), StoreError> {
    if let Some(a) = &input.assignee {
        issue.assignee = match a.as_str() {
            "" => None,
            "me" => Some(w.actor.clone()),
            a => Some(a.to_string()),
        };
    }
    if let Some(p) = &input.parent_id {
        issue.parent_id = match non_empty(Some(p)) {
            None => None,
            Some(p) => {
                let parent = find_issue(w, p)?;
                // No issue may become its own ancestor.
                let mut at = Some(parent.clone());
                while let Some(a) = at {
                    if a.id == issue.id {
                        return Err(StoreError::Invalid(format!(
                            "{} cannot be a sub-issue of its own sub-issue {}",
                            issue.identifier, parent.identifier
                        )));
                    }
                    at = match a.parent_id {
                        Some(pid) => one(
                            w,
                            "SELECT * FROM issues WHERE id = ?1",
                            params![pid],
                            issue_from_row,
                        )?,
                        None => None,
                    };
                }
                Some(parent.id)
            }
        };
    }
    if let Some(p) = &input.project {
        issue.project_id = match non_empty(Some(p)) {
            None => None,
            Some(p) => Some(plan::find_project(w, p)?.id),
        };
    }
    if let Some(c) = &input.cycle {
        issue.cycle = match non_empty(Some(c)) {
            None => None,
            Some(c) => Some(plan::find_cycle(w, c, Some(&issue.team_id))?.id),
        };
    }
    if let Some(m) = &input.milestone {
        issue.milestone = match non_empty(Some(m)) {
            None => None,
            Some(m) => Some(plan::find_milestone(w, m, issue.project_id.as_deref())?.id),
        };
    }
    Ok(())
}

pub(super) fn create_issue(w: &mut Tx<'_>, input: &SaveIssue) -> Result<Issue, StoreError> {
    let team = input
        .team
        .as_deref()
        .ok_or_else(|| StoreError::Invalid("a new issue needs a team".into()))?;
    let title = input
        .title
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| StoreError::Invalid("a new issue needs a title".into()))?;
    let team = find_team(w, team)?;
    let number: i64 = w.query_row(
        "SELECT next_number FROM teams WHERE id = ?1",
        params![team.id],
        |r| r.get(0),
    )?;
    w.execute(
        "UPDATE teams SET next_number = next_number + 1 WHERE id = ?1",
        params![team.id],
    )?;
    let (state, state_type) = resolve_state(input.state.as_deref())?;
    let identifier = if team.cut_over {
        format!("LOCAL-{}-{number}", team.key)
    } else {
        format!("{}-{number}", team.key)
    };
    let mut issue = Issue {
        id: new_id(),
        identifier,
        team_id: team.id,
        title: title.into(),
        description: input.description.clone().unwrap_or_default(),
        state,
        state_type,
        priority: input.priority.unwrap_or(0).clamp(0, 4),
        assignee: None,
        labels: clean_labels(input.labels.as_deref().unwrap_or_default()),
        parent_id: None,
        cycle: None,
        milestone: None,
        project_id: None,
        linear_id: None,
        created_by: w.actor.clone(),
        created_at: w.now,
        updated_at: w.now,
    };
    apply_refs(w, &mut issue, input)?;
    insert_issue(w, &issue, number).map_err(|e| match e {
        StoreError::Sqlite(e) if is_constraint(&e) => {
            StoreError::Conflict(format!("{} already exists", issue.identifier))
        }
        e => e,
    })?;
    w.change("issue", &issue.id, "create")?;
    Ok(issue)
}

pub(super) fn update_issue(
    w: &mut Tx<'_>,
    id: &str,
    input: &SaveIssue,
) -> Result<Issue, StoreError> {
    let mut issue = find_issue(w, id)?;
    check_fresh(input.if_updated_at, issue.updated_at, &issue.identifier)?;
    if let Some(team) = &input.team
        && find_team(w, team)?.id != issue.team_id
    {
        return Err(StoreError::Invalid(format!(
            "{} cannot move to another team",
            issue.identifier
        )));
    }
    if let Some(t) = &input.title {
        if t.trim().is_empty() {
            return Err(StoreError::Invalid("a title cannot be empty".into()));
        }
        issue.title = t.clone();
    }
    if let Some(d) = &input.description {
        issue.description = d.clone();
    }
    if let Some(s) = &input.state {
        let (state, state_type) = resolve_state(Some(s))?;
        issue.state = state;
        issue.state_type = state_type;
    }
    if let Some(p) = input.priority {
        issue.priority = p.clamp(0, 4);
    }
    if let Some(l) = &input.labels {
        issue.labels = clean_labels(l);
    }
    apply_refs(w, &mut issue, input)?;
    issue.updated_at = bump(w.now, issue.updated_at);
    w.execute(
        "UPDATE issues SET title = ?2, description = ?3, state = ?4, state_type = ?5, priority = ?6,
             assignee = ?7, labels = ?8, parent_id = ?9, cycle = ?10, milestone = ?11, updated_at = ?12,
             project_id = ?13
         WHERE id = ?1",
        params![
            issue.id,
            issue.title,
            issue.description,
            issue.state,
            issue.state_type,
            issue.priority,
            issue.assignee,
            serde_json::to_string(&issue.labels)?,
            issue.parent_id,
            issue.cycle,
            issue.milestone,
            issue.updated_at,
            issue.project_id
        ],
    )?;
    w.change("issue", &issue.id, "update")?;
    Ok(issue)
}

impl Store {
    /// An issue by id, identifier (`TEAM-n`) or Linear UUID.
    pub fn issue(&self, id: &str) -> Result<Issue, StoreError> {
        find_issue(&self.conn, id)
    }

    /// Child issues of an issue, oldest first.
    pub fn children(&self, issue: &str) -> Result<Vec<Issue>, StoreError> {
        let id = self.issue(issue)?.id;
        all(
            &self.conn,
            "SELECT * FROM issues WHERE parent_id = ?1 ORDER BY created_at, id",
            params![id],
            issue_from_row,
        )
    }

    /// Issues of a team (or all), optionally of one state category,
    /// newest first.
    pub fn issues(
        &self,
        team: Option<&str>,
        state_type: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Issue>, StoreError> {
        let team_id = match team {
            Some(t) => Some(self.team(t)?.id),
            None => None,
        };
        all(
            &self.conn,
            "SELECT * FROM issues
             WHERE (?1 IS NULL OR team_id = ?1) AND (?2 IS NULL OR state_type = ?2)
             ORDER BY updated_at DESC LIMIT ?3",
            params![team_id, state_type, limit.min(250) as i64],
            issue_from_row,
        )
    }

    /// One page of issues matching `q`, most recently updated (or created)
    /// first. `me` resolves the assignee "me".
    pub fn query_issues(&self, q: &IssueQuery, me: &str) -> Result<Page<Issue>, StoreError> {
        use rusqlite::types::Value as Sql;
        let mut conds: Vec<&str> = Vec::new();
        let mut vals: Vec<Sql> = Vec::new();
        if let Some(t) = &q.team {
            conds.push("team_id = ?");
            vals.push(Sql::Text(self.team(t)?.id));
        }
        if let Some(s) = &q.state {
            if let Some((name, _)) = state_type(s) {
                conds.push("state = ?");
                vals.push(Sql::Text(name.into()));
            } else if crate::vocabulary::STATE_TYPES.contains(&s.to_ascii_lowercase().as_str()) {
                conds.push("state_type = ?");
                vals.push(Sql::Text(s.to_ascii_lowercase()));
            } else {
                return Err(StoreError::Invalid(format!("unknown state {s}")));
            }
        }
        if let Some(a) = &q.assignee {
            conds.push("assignee = ?");
            vals.push(Sql::Text(if a == "me" { me.into() } else { a.clone() }));
        }
        if let Some(l) = &q.label {
            conds.push(
                "EXISTS (SELECT 1 FROM json_each(issues.labels) WHERE lower(value) = lower(?))",
            );
            vals.push(Sql::Text(l.clone()));
        }
        if let Some(p) = &q.project {
            conds.push("project_id = ?");
            vals.push(Sql::Text(plan::find_project(&self.conn, p)?.id));
        }
        if let Some(c) = &q.cycle {
            conds.push("cycle = ?");
            vals.push(Sql::Text(plan::find_cycle(&self.conn, c, None)?.id));
        }
        if let Some(p) = &q.parent {
            conds.push("parent_id = ?");
            vals.push(Sql::Text(self.issue(p)?.id));
        }
        if let Some(t) = &q.text {
            conds.push(
                "(instr(lower(identifier), lower(?)) > 0 OR instr(lower(title), lower(?)) > 0
                  OR instr(lower(description), lower(?)) > 0)",
            );
            for _ in 0..3 {
                vals.push(Sql::Text(t.clone()));
            }
        }
        let col = if q.order_by_created {
            "created_at"
        } else {
            "updated_at"
        };
        let keyset;
        if let Some(c) = &q.cursor {
            let (ts, id) = c
                .split_once('/')
                .and_then(|(ts, id)| ts.parse::<i64>().ok().map(|ts| (ts, id.to_string())))
                .ok_or_else(|| StoreError::Invalid(format!("cursor {c} is not from this list")))?;
            keyset = format!("({col} < ? OR ({col} = ? AND id < ?))");
            conds.push(&keyset);
            vals.push(Sql::Integer(ts));
            vals.push(Sql::Integer(ts));
            vals.push(Sql::Text(id));
        }
        let limit = page_limit(q.limit);
        vals.push(Sql::Integer(limit + 1));
        let sql = format!(
            "SELECT * FROM issues {} {} ORDER BY {col} DESC, id DESC LIMIT ?",
            if conds.is_empty() { "" } else { "WHERE" },
            conds.join(" AND ")
        );
        let mut items = all(
            &self.conn,
            &sql,
            rusqlite::params_from_iter(vals),
            issue_from_row,
        )?;
        let has_more = items.len() as i64 > limit;
        items.truncate(limit as usize);
        let cursor = if has_more {
            items.last().map(|i| {
                let ts = if q.order_by_created {
                    i.created_at
                } else {
                    i.updated_at
                };
                format!("{ts}/{}", i.id)
            })
        } else {
            None
        };
        Ok(Page {
            items,
            cursor,
            has_more,
        })
    }

    /// Creates or updates an issue as a trusted `actor`.
    pub fn save_issue(
        &mut self,
        actor: &str,
        input: SaveIssue,
    ) -> Result<Written<Issue>, StoreError> {
        self.save_issue_by(Writer { actor, role: None }, "save_issue", input)
    }

    /// Creates or updates an issue as a caller with a role: limited roles
    /// cannot set `cycle` or a completed-category state.
    pub fn save_issue_as(
        &mut self,
        caller: &Caller,
        input: SaveIssue,
    ) -> Result<Written<Issue>, StoreError> {
        if caller.role.limited() {
            let role = caller.role;
            if input.cycle.is_some() {
                return Err(StoreError::NotAllowed {
                    role,
                    what: format!("save_issue cannot set cycle for the {role} role"),
                });
            }
            if let Some(s) = &input.state
                && crate::vocabulary::is_completed_state(s)
            {
                return Err(StoreError::NotAllowed {
                    role,
                    what: format!(
                        "save_issue cannot move an issue to the completed state {s} for the {role} role"
                    ),
                });
            }
        }
        self.save_issue_by(caller.who(), "save_issue", input)
    }

    pub(super) fn save_issue_by(
        &mut self,
        who: Writer<'_>,
        tool: &str,
        input: SaveIssue,
    ) -> Result<Written<Issue>, StoreError> {
        let key = input.idempotency_key.clone();
        self.write(who, tool, key.as_deref(), |w| match &input.id {
            None => create_issue(w, &input),
            Some(id) => update_issue(w, id, &input),
        })
    }

    /// Sets an issue's state, completed states included (lead only).
    pub fn save_issue_status(
        &mut self,
        caller: &Caller,
        input: SaveIssueStatus,
    ) -> Result<Written<Issue>, StoreError> {
        caller.who().require_lead("save_issue_status")?;
        let update = SaveIssue {
            id: Some(input.id),
            state: Some(input.state),
            if_updated_at: input.if_updated_at,
            idempotency_key: input.idempotency_key,
            ..Default::default()
        };
        self.save_issue_by(caller.who(), "save_issue_status", update)
    }
}
