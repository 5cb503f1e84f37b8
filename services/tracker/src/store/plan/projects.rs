//! Projects, their status updates, and labels.

use super::*;

impl Store {
    /// Creates or updates a project (lead only).
    pub fn save_project(
        &mut self,
        caller: &Caller,
        input: SaveProject,
    ) -> Result<Written<Project>, StoreError> {
        caller.who().require_lead("save_project")?;
        if let Some(s) = &input.state {
            one_of(s, PROJECT_STATUSES, "state")?;
        }
        if let Some(d) = non_empty(input.target_date.as_deref()) {
            valid_date(d)?;
        }
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "save_project", key.as_deref(), |w| {
            let team_id = match &input.team {
                Some(t) => Some(find_team(w, t)?.id),
                None => None,
            };
            let duplicate = |e: rusqlite::Error, name: &str| {
                if is_constraint(&e) {
                    StoreError::Conflict(format!("a project named {name} exists"))
                } else {
                    StoreError::Sqlite(e)
                }
            };
            if let Some(id) = &input.id {
                let mut p = find_project(w, id)?;
                check_fresh(input.if_updated_at, p.updated_at, &format!("project {}", p.name))?;
                if let Some(n) = &input.name {
                    p.name = required(Some(n), "name")?.to_string();
                }
                if team_id.is_some() {
                    p.team_id = team_id;
                }
                if let Some(s) = &input.state {
                    p.state = s.clone();
                }
                if let Some(d) = &input.description {
                    p.description = d.clone();
                }
                if let Some(l) = &input.lead {
                    p.lead = non_empty(Some(l)).map(str::to_string);
                }
                if let Some(d) = &input.target_date {
                    p.target_date = non_empty(Some(d)).map(str::to_string);
                }
                p.updated_at = bump(w.now, p.updated_at);
                w.execute(
                    "UPDATE projects SET name = ?2, team_id = ?3, state = ?4, description = ?5, lead = ?6,
                         target_date = ?7, updated_at = ?8 WHERE id = ?1",
                    params![
                        p.id,
                        p.name,
                        p.team_id,
                        p.state,
                        p.description,
                        p.lead,
                        p.target_date,
                        p.updated_at
                    ],
                )
                .map_err(|e| duplicate(e, &p.name))?;
                w.change("project", &p.id, "update")?;
                return Ok(p);
            }
            let p = Project {
                id: new_id(),
                name: required(input.name.as_deref(), "name")?.to_string(),
                team_id,
                state: input.state.clone().unwrap_or_else(|| "backlog".into()),
                description: input.description.clone().unwrap_or_default(),
                lead: non_empty(input.lead.as_deref()).map(str::to_string),
                target_date: non_empty(input.target_date.as_deref()).map(str::to_string),
                created_by: w.actor.clone(),
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO projects (id, name, team_id, state, description, lead, target_date,
                     created_by, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
                params![
                    p.id,
                    p.name,
                    p.team_id,
                    p.state,
                    p.description,
                    p.lead,
                    p.target_date,
                    p.created_by,
                    p.created_at
                ],
            )
            .map_err(|e| duplicate(e, &p.name))?;
            w.change("project", &p.id, "create")?;
            Ok(p)
        })
    }

    /// A project by id or name.
    pub fn project(&self, reference: &str) -> Result<Project, StoreError> {
        find_project(&self.conn, reference)
    }

    /// One page of projects, most recently updated first.
    pub fn projects(&self, q: &ProjectQuery) -> Result<Page<Project>, StoreError> {
        let team_id = match &q.team {
            Some(t) => Some(self.team(t)?.id),
            None => None,
        };
        let (ts, id) = match &q.cursor {
            Some(c) => {
                let (ts, id) = c
                    .split_once('/')
                    .and_then(|(ts, id)| ts.parse::<i64>().ok().map(|ts| (ts, id.to_string())))
                    .ok_or_else(|| {
                        StoreError::Invalid(format!("cursor {c} is not from this list"))
                    })?;
                (Some(ts), Some(id))
            }
            None => (None, None),
        };
        let limit = page_limit(q.limit);
        let mut items = all(
            &self.conn,
            "SELECT * FROM projects
             WHERE (?1 IS NULL OR team_id = ?1) AND (?2 IS NULL OR state = ?2)
               AND (?3 IS NULL OR instr(lower(name), lower(?3)) > 0)
               AND (?4 IS NULL OR updated_at < ?4 OR (updated_at = ?4 AND id < ?5))
             ORDER BY updated_at DESC, id DESC LIMIT ?6",
            params![team_id, q.state, q.text, ts, id, limit + 1],
            project_from_row,
        )?;
        let has_more = items.len() as i64 > limit;
        items.truncate(limit as usize);
        let cursor = if has_more {
            items.last().map(|p| format!("{}/{}", p.updated_at, p.id))
        } else {
            None
        };
        Ok(Page {
            items,
            cursor,
            has_more,
        })
    }

    /// Posts a project status update, or edits one. Limited roles edit
    /// only their own.
    pub fn save_status_update(
        &mut self,
        caller: &Caller,
        input: SaveStatusUpdate,
    ) -> Result<Written<StatusUpdate>, StoreError> {
        if let Some(h) = &input.health {
            one_of(h, HEALTH, "health")?;
        }
        let who = caller.who();
        let key = input.idempotency_key.clone();
        self.write(who, "save_status_update", key.as_deref(), |w| {
            if let Some(id) = &input.id {
                let mut u = one(
                    w,
                    "SELECT * FROM status_updates WHERE id = ?1",
                    params![id],
                    update_from_row,
                )?
                .ok_or_else(|| StoreError::NotFound(format!("status update {id}")))?;
                who.own_only(&u.author, "editing another author's status update")?;
                check_fresh(input.if_updated_at, u.updated_at, &format!("status update {id}"))?;
                if let Some(p) = &input.project_id
                    && find_project(w, p)?.id != u.project_id
                {
                    return Err(StoreError::Invalid(format!(
                        "status update {id} is of another project"
                    )));
                }
                if let Some(h) = &input.health {
                    u.health = h.clone();
                }
                if let Some(b) = &input.body {
                    u.body = required(Some(b), "body")?.to_string();
                }
                u.updated_at = bump(w.now, u.updated_at);
                w.execute(
                    "UPDATE status_updates SET health = ?2, body = ?3, updated_at = ?4 WHERE id = ?1",
                    params![u.id, u.health, u.body, u.updated_at],
                )?;
                w.change("status_update", &u.id, "update")?;
                return Ok(u);
            }
            let project = find_project(w, required(input.project_id.as_deref(), "projectId")?)?;
            let u = StatusUpdate {
                id: new_id(),
                project_id: project.id,
                health: required(input.health.as_deref(), "health")?.to_string(),
                body: required(input.body.as_deref(), "body")?.to_string(),
                author: w.actor.clone(),
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO status_updates (id, project_id, health, body, author, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                params![u.id, u.project_id, u.health, u.body, u.author, u.created_at],
            )?;
            w.change("status_update", &u.id, "create")?;
            Ok(u)
        })
    }

    /// Status updates, newest first: one by id, one project's, or all.
    pub fn status_updates(
        &self,
        project: Option<&str>,
        id: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<StatusUpdate>, StoreError> {
        let project_id = match project {
            Some(p) => Some(self.project(p)?.id),
            None => None,
        };
        all(
            &self.conn,
            "SELECT * FROM status_updates WHERE (?1 IS NULL OR project_id = ?1) AND (?2 IS NULL OR id = ?2)
             ORDER BY created_at DESC, rowid DESC LIMIT ?3",
            params![project_id, id, page_limit(limit)],
            update_from_row,
        )
    }

    /// Creates or updates an issue label. `tool` is the tool called
    /// (`save_issue_label` or `create_issue_label`).
    pub fn save_label(
        &mut self,
        caller: &Caller,
        tool: &str,
        input: SaveLabel,
    ) -> Result<Written<Label>, StoreError> {
        if let Some(c) = &input.color {
            valid_color(c)?;
        }
        let key = input.idempotency_key.clone();
        self.write(caller.who(), tool, key.as_deref(), |w| {
            let team_id = match non_empty(input.team_id.as_deref()) {
                Some(t) => Some(find_team(w, t)?.id),
                None => None,
            };
            let duplicate = |e: rusqlite::Error, name: &str| {
                if is_constraint(&e) {
                    StoreError::Conflict(format!("a label named {name} exists there"))
                } else {
                    StoreError::Sqlite(e)
                }
            };
            if let Some(id) = &input.id {
                let mut l = one(
                    w,
                    "SELECT * FROM labels WHERE id = ?1",
                    params![id],
                    label_from_row,
                )?
                .ok_or_else(|| StoreError::NotFound(format!("label {id}")))?;
                check_fresh(input.if_updated_at, l.updated_at, &format!("label {}", l.name))?;
                if let Some(n) = &input.name {
                    l.name = required(Some(n), "name")?.to_string();
                }
                if input.color.is_some() {
                    l.color = input.color.clone();
                }
                if let Some(d) = &input.description {
                    l.description = d.clone();
                }
                if input.team_id.is_some() {
                    l.team_id = team_id;
                }
                l.updated_at = bump(w.now, l.updated_at);
                w.execute(
                    "UPDATE labels SET name = ?2, color = ?3, description = ?4, team_id = ?5, updated_at = ?6
                     WHERE id = ?1",
                    params![l.id, l.name, l.color, l.description, l.team_id, l.updated_at],
                )
                .map_err(|e| duplicate(e, &l.name))?;
                w.change("label", &l.id, "update")?;
                return Ok(l);
            }
            let l = Label {
                id: new_id(),
                name: required(input.name.as_deref(), "name")?.to_string(),
                color: input.color.clone(),
                description: input.description.clone().unwrap_or_default(),
                team_id,
                created_at: w.now,
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO labels (id, name, color, description, team_id, created_by, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                params![l.id, l.name, l.color, l.description, l.team_id, w.actor, l.created_at],
            )
            .map_err(|e| duplicate(e, &l.name))?;
            w.change("label", &l.id, "create")?;
            Ok(l)
        })
    }

    /// Labels by name: workspace labels, plus a team's when one is given.
    pub fn labels(
        &self,
        team: Option<&str>,
        query: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<Label>, StoreError> {
        let team_id = match team {
            Some(t) => Some(self.team(t)?.id),
            None => None,
        };
        all(
            &self.conn,
            "SELECT * FROM labels
             WHERE (?1 IS NULL OR team_id IS NULL OR team_id = ?1)
               AND (?2 IS NULL OR instr(lower(name), lower(?2)) > 0)
             ORDER BY lower(name), team_id LIMIT ?3",
            params![team_id, query, page_limit(limit)],
            label_from_row,
        )
    }
}
