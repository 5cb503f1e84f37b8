//! Planning entities: projects and their status updates, labels, cycles,
//! milestones, documents, releases and initiatives.
//!
//! Projects, status updates and labels are written through tools; cycles,
//! milestones, documents, releases and initiatives are seeded through the
//! store's own functions and read through tools.

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use super::{
    Caller, Page, Store, StoreError, Who, Written, all, bump, check_fresh, find_issue, find_team,
    is_constraint, json_list, new_id, non_empty, one, one_of, page_limit, required,
};
use crate::vocabulary::{HEALTH, PROJECT_STATUSES};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub id: String,
    pub name: String,
    pub team_id: Option<String>,
    pub state: String,
    pub description: String,
    pub lead: Option<String>,
    /// YYYY-MM-DD.
    pub target_date: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdate {
    pub id: String,
    pub project_id: String,
    /// onTrack, atRisk or offTrack.
    pub health: String,
    pub body: String,
    pub author: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Label {
    pub id: String,
    pub name: String,
    pub color: Option<String>,
    pub description: String,
    /// None for a workspace label.
    pub team_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Cycle {
    pub id: String,
    pub team_id: String,
    pub number: i64,
    pub name: String,
    pub starts_at: i64,
    pub ends_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Milestone {
    pub id: String,
    pub project_id: String,
    pub name: String,
    pub description: String,
    pub target_date: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    pub id: String,
    pub title: String,
    /// Empty in lists.
    pub content: String,
    pub project_id: Option<String>,
    pub issue_id: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Release {
    pub id: String,
    pub name: String,
    pub notes: String,
    pub issue_ids: Vec<String>,
    pub released_at: i64,
    pub created_by: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Initiative {
    pub id: String,
    pub name: String,
    pub description: String,
    pub status: String,
    pub target_date: Option<String>,
    pub created_by: String,
    pub created_at: i64,
}

/// `save_project` input (lead only): create without `id`, update with it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveProject {
    pub id: Option<String>,
    pub name: Option<String>,
    pub team: Option<String>,
    pub state: Option<String>,
    pub description: Option<String>,
    pub lead: Option<String>,
    pub target_date: Option<String>,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

/// `save_status_update` input: post without `id`, edit with it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveStatusUpdate {
    pub id: Option<String>,
    pub project_id: Option<String>,
    pub health: Option<String>,
    pub body: Option<String>,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

/// `save_issue_label` input: create without `id`, update with it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveLabel {
    pub id: Option<String>,
    pub name: Option<String>,
    pub color: Option<String>,
    pub description: Option<String>,
    pub team_id: Option<String>,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

/// Filters of `list_projects`.
#[derive(Debug, Clone, Default)]
pub struct ProjectQuery {
    pub team: Option<String>,
    pub state: Option<String>,
    pub text: Option<String>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

fn project_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Project> {
    Ok(Project {
        id: r.get("id")?,
        name: r.get("name")?,
        team_id: r.get("team_id")?,
        state: r.get("state")?,
        description: r.get("description")?,
        lead: r.get("lead")?,
        target_date: r.get("target_date")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn update_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StatusUpdate> {
    Ok(StatusUpdate {
        id: r.get("id")?,
        project_id: r.get("project_id")?,
        health: r.get("health")?,
        body: r.get("body")?,
        author: r.get("author")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn label_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Label> {
    Ok(Label {
        id: r.get("id")?,
        name: r.get("name")?,
        color: r.get("color")?,
        description: r.get("description")?,
        team_id: r.get("team_id")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn cycle_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Cycle> {
    Ok(Cycle {
        id: r.get("id")?,
        team_id: r.get("team_id")?,
        number: r.get("number")?,
        name: r.get("name")?,
        starts_at: r.get("starts_at")?,
        ends_at: r.get("ends_at")?,
    })
}

fn milestone_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Milestone> {
    Ok(Milestone {
        id: r.get("id")?,
        project_id: r.get("project_id")?,
        name: r.get("name")?,
        description: r.get("description")?,
        target_date: r.get("target_date")?,
    })
}

fn document_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Document> {
    Ok(Document {
        id: r.get("id")?,
        title: r.get("title")?,
        content: r.get("content")?,
        project_id: r.get("project_id")?,
        issue_id: r.get("issue_id")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn release_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Release> {
    let ids: String = r.get("issue_ids")?;
    Ok(Release {
        id: r.get("id")?,
        name: r.get("name")?,
        notes: r.get("notes")?,
        issue_ids: json_list(&ids),
        released_at: r.get("released_at")?,
        created_by: r.get("created_by")?,
    })
}

fn initiative_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Initiative> {
    Ok(Initiative {
        id: r.get("id")?,
        name: r.get("name")?,
        description: r.get("description")?,
        status: r.get("status")?,
        target_date: r.get("target_date")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
    })
}

/// A project by id or name (any case).
pub(super) fn find_project(conn: &Connection, reference: &str) -> Result<Project, StoreError> {
    one(
        conn,
        "SELECT * FROM projects WHERE id = ?1 OR lower(name) = lower(?1) LIMIT 1",
        params![reference],
        project_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("project {reference}")))
}

/// A cycle by id, or by name or number within a team.
pub(super) fn find_cycle(
    conn: &Connection,
    reference: &str,
    team_id: Option<&str>,
) -> Result<Cycle, StoreError> {
    let number = reference.parse::<i64>().ok();
    one(
        conn,
        "SELECT * FROM cycles WHERE (id = ?1 OR lower(name) = lower(?1) OR number = ?2)
           AND (?3 IS NULL OR team_id = ?3)
         ORDER BY id = ?1 DESC LIMIT 1",
        params![reference, number, team_id],
        cycle_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("cycle {reference}")))
}

/// A milestone by id, or by name (within a project when one is given).
pub(super) fn find_milestone(
    conn: &Connection,
    reference: &str,
    project_id: Option<&str>,
) -> Result<Milestone, StoreError> {
    one(
        conn,
        "SELECT * FROM milestones WHERE (id = ?1 OR lower(name) = lower(?1))
           AND (?2 IS NULL OR project_id = ?2)
         ORDER BY id = ?1 DESC LIMIT 1",
        params![reference, project_id],
        milestone_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("milestone {reference}")))
}

fn valid_date(date: &str) -> Result<(), StoreError> {
    let b = date.as_bytes();
    let ok = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "date {date} is not YYYY-MM-DD"
        )))
    }
}

fn valid_color(color: &str) -> Result<(), StoreError> {
    let ok = color.len() == 7
        && color.starts_with('#')
        && color[1..].chars().all(|c| c.is_ascii_hexdigit());
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!("color {color} is not #rrggbb")))
    }
}

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

    /// Seeds a cycle of a team; its number is the team's next.
    pub fn create_cycle(
        &mut self,
        actor: &str,
        team: &str,
        name: &str,
        starts_at: i64,
        ends_at: i64,
    ) -> Result<Cycle, StoreError> {
        if ends_at <= starts_at {
            return Err(StoreError::Invalid("a cycle ends after it starts".into()));
        }
        let who = Who { actor, role: None };
        Ok(self
            .write(who, "create_cycle", None, |w| {
                let team = find_team(w, team)?;
                let number: i64 = w.query_row(
                    "SELECT COALESCE(MAX(number), 0) + 1 FROM cycles WHERE team_id = ?1",
                    params![team.id],
                    |r| r.get(0),
                )?;
                let c = Cycle {
                    id: new_id(),
                    team_id: team.id,
                    number,
                    name: if name.trim().is_empty() {
                        format!("Cycle {number}")
                    } else {
                        name.to_string()
                    },
                    starts_at,
                    ends_at,
                };
                w.execute(
                    "INSERT INTO cycles (id, team_id, number, name, starts_at, ends_at, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        c.id,
                        c.team_id,
                        c.number,
                        c.name,
                        c.starts_at,
                        c.ends_at,
                        w.now
                    ],
                )?;
                w.change("cycle", &c.id, "create")?;
                Ok(c)
            })?
            .value)
    }

    /// One cycle by id.
    pub fn cycle(&self, id: &str) -> Result<Cycle, StoreError> {
        one(
            &self.conn,
            "SELECT * FROM cycles WHERE id = ?1",
            params![id],
            cycle_from_row,
        )?
        .ok_or_else(|| StoreError::NotFound(format!("cycle {id}")))
    }

    /// Cycles by start, of one team or all; `which` is current, previous or
    /// next relative to the store's clock.
    pub fn cycles(
        &self,
        team: Option<&str>,
        which: Option<&str>,
    ) -> Result<Vec<Cycle>, StoreError> {
        let team_id = match team {
            Some(t) => Some(self.team(t)?.id),
            None => None,
        };
        let now = self.now();
        let (filter, order) = match which {
            None => ("1", "starts_at"),
            Some("current") => ("starts_at <= ?2 AND ends_at > ?2", "starts_at"),
            Some("previous") => ("ends_at <= ?2", "ends_at DESC"),
            Some("next") => ("starts_at > ?2", "starts_at"),
            Some(other) => {
                return Err(StoreError::Invalid(format!(
                    "type must be current, previous or next, not {other}"
                )));
            }
        };
        // One per team for current/previous/next.
        let mut cycles = all(
            &self.conn,
            &format!(
                "SELECT * FROM cycles WHERE (?1 IS NULL OR team_id = ?1) AND {filter} AND ?2 = ?2
                 ORDER BY {order}, team_id"
            ),
            params![team_id, now],
            cycle_from_row,
        )?;
        if which.is_some() {
            let mut seen = std::collections::HashSet::new();
            cycles.retain(|c| seen.insert(c.team_id.clone()));
        }
        Ok(cycles)
    }

    /// Seeds a project milestone.
    pub fn create_milestone(
        &mut self,
        actor: &str,
        project: &str,
        name: &str,
        description: &str,
        target_date: Option<&str>,
    ) -> Result<Milestone, StoreError> {
        if let Some(d) = target_date {
            valid_date(d)?;
        }
        let name = required(Some(name), "name")?.to_string();
        let who = Who { actor, role: None };
        Ok(self
            .write(who, "create_milestone", None, |w| {
                let project = find_project(w, project)?;
                let m = Milestone {
                    id: new_id(),
                    project_id: project.id,
                    name,
                    description: description.into(),
                    target_date: target_date.map(str::to_string),
                };
                w.execute(
                    "INSERT INTO milestones (id, project_id, name, description, target_date, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![m.id, m.project_id, m.name, m.description, m.target_date, w.now],
                )?;
                w.change("milestone", &m.id, "create")?;
                Ok(m)
            })?
            .value)
    }

    /// One milestone by id.
    pub fn milestone(&self, id: &str) -> Result<Milestone, StoreError> {
        one(
            &self.conn,
            "SELECT * FROM milestones WHERE id = ?1",
            params![id],
            milestone_from_row,
        )?
        .ok_or_else(|| StoreError::NotFound(format!("milestone {id}")))
    }

    /// Milestones by target date (undated last), of one project or all.
    pub fn milestones(
        &self,
        project: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<Milestone>, StoreError> {
        let project_id = match project {
            Some(p) => Some(self.project(p)?.id),
            None => None,
        };
        all(
            &self.conn,
            "SELECT * FROM milestones WHERE ?1 IS NULL OR project_id = ?1
             ORDER BY target_date IS NULL, target_date, created_at LIMIT ?2",
            params![project_id, page_limit(limit)],
            milestone_from_row,
        )
    }

    /// Seeds a document, optionally of a project and/or an issue.
    pub fn create_document(
        &mut self,
        actor: &str,
        title: &str,
        content: &str,
        project: Option<&str>,
        issue: Option<&str>,
    ) -> Result<Document, StoreError> {
        let title = required(Some(title), "title")?.to_string();
        let who = Who { actor, role: None };
        Ok(self
            .write(who, "create_document", None, |w| {
                let project_id = match project {
                    Some(p) => Some(find_project(w, p)?.id),
                    None => None,
                };
                let issue_id = match issue {
                    Some(i) => Some(find_issue(w, i)?.id),
                    None => None,
                };
                let d = Document {
                    id: new_id(),
                    title,
                    content: content.into(),
                    project_id,
                    issue_id,
                    created_by: actor.into(),
                    created_at: w.now,
                    updated_at: w.now,
                };
                w.execute(
                    "INSERT INTO documents (id, title, content, project_id, issue_id, created_by, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                    params![d.id, d.title, d.content, d.project_id, d.issue_id, d.created_by, d.created_at],
                )?;
                w.change("document", &d.id, "create")?;
                Ok(d)
            })?
            .value)
    }

    /// One document by id or exact title.
    pub fn document(&self, reference: &str) -> Result<Document, StoreError> {
        one(
            &self.conn,
            "SELECT * FROM documents WHERE id = ?1 OR title = ?1 ORDER BY id = ?1 DESC LIMIT 1",
            params![reference],
            document_from_row,
        )?
        .ok_or_else(|| StoreError::NotFound(format!("document {reference}")))
    }

    /// Documents without their content, most recently updated first.
    pub fn documents(
        &self,
        project: Option<&str>,
        issue: Option<&str>,
        query: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<Document>, StoreError> {
        let project_id = match project {
            Some(p) => Some(self.project(p)?.id),
            None => None,
        };
        let issue_id = match issue {
            Some(i) => Some(self.issue(i)?.id),
            None => None,
        };
        let mut docs = all(
            &self.conn,
            "SELECT * FROM documents
             WHERE (?1 IS NULL OR project_id = ?1) AND (?2 IS NULL OR issue_id = ?2)
               AND (?3 IS NULL OR instr(lower(title), lower(?3)) > 0)
             ORDER BY updated_at DESC, id LIMIT ?4",
            params![project_id, issue_id, query, page_limit(limit)],
            document_from_row,
        )?;
        for d in &mut docs {
            d.content.clear();
        }
        Ok(docs)
    }

    /// Seeds a release of some issues, released now.
    pub fn create_release(
        &mut self,
        actor: &str,
        name: &str,
        notes: &str,
        issues: &[&str],
    ) -> Result<Release, StoreError> {
        let name = required(Some(name), "name")?.to_string();
        let who = Who { actor, role: None };
        Ok(self
            .write(who, "create_release", None, |w| {
                let issue_ids = issues
                    .iter()
                    .map(|i| find_issue(w, i).map(|i| i.id))
                    .collect::<Result<Vec<_>, _>>()?;
                let r = Release {
                    id: new_id(),
                    name,
                    notes: notes.into(),
                    issue_ids,
                    released_at: w.now,
                    created_by: actor.into(),
                };
                w.execute(
                    "INSERT INTO releases (id, name, notes, issue_ids, released_at, created_by)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        r.id,
                        r.name,
                        r.notes,
                        serde_json::to_string(&r.issue_ids)?,
                        r.released_at,
                        r.created_by
                    ],
                )
                .map_err(|e| {
                    if is_constraint(&e) {
                        StoreError::Conflict(format!("release {} exists", r.name))
                    } else {
                        StoreError::Sqlite(e)
                    }
                })?;
                w.change("release", &r.id, "create")?;
                Ok(r)
            })?
            .value)
    }

    /// One release by id or name.
    pub fn release(&self, reference: &str) -> Result<Release, StoreError> {
        one(
            &self.conn,
            "SELECT * FROM releases WHERE id = ?1 OR name = ?1 LIMIT 1",
            params![reference],
            release_from_row,
        )?
        .ok_or_else(|| StoreError::NotFound(format!("release {reference}")))
    }

    /// Releases, newest first.
    pub fn releases(&self, limit: Option<i64>) -> Result<Vec<Release>, StoreError> {
        all(
            &self.conn,
            "SELECT * FROM releases ORDER BY released_at DESC, rowid DESC LIMIT ?1",
            params![page_limit(limit)],
            release_from_row,
        )
    }

    /// Seeds an initiative.
    pub fn create_initiative(
        &mut self,
        actor: &str,
        name: &str,
        description: &str,
        status: &str,
        target_date: Option<&str>,
    ) -> Result<Initiative, StoreError> {
        if let Some(d) = target_date {
            valid_date(d)?;
        }
        let name = required(Some(name), "name")?.to_string();
        let who = Who { actor, role: None };
        Ok(self
            .write(who, "create_initiative", None, |w| {
                let i = Initiative {
                    id: new_id(),
                    name,
                    description: description.into(),
                    status: status.into(),
                    target_date: target_date.map(str::to_string),
                    created_by: actor.into(),
                    created_at: w.now,
                };
                w.execute(
                    "INSERT INTO initiatives (id, name, description, status, target_date, created_by, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![i.id, i.name, i.description, i.status, i.target_date, i.created_by, i.created_at],
                )?;
                w.change("initiative", &i.id, "create")?;
                Ok(i)
            })?
            .value)
    }

    /// Initiatives by name.
    pub fn initiatives(
        &self,
        query: Option<&str>,
        status: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<Initiative>, StoreError> {
        all(
            &self.conn,
            "SELECT * FROM initiatives
             WHERE (?1 IS NULL OR instr(lower(name), lower(?1)) > 0)
               AND (?2 IS NULL OR lower(status) = lower(?2))
             ORDER BY lower(name) LIMIT ?3",
            params![query, status, page_limit(limit)],
            initiative_from_row,
        )
    }
}
