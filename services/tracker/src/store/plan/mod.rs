//! Planning entities: projects and their status updates, labels, cycles,
//! milestones, documents, releases and initiatives.
//!
//! Projects, status updates and labels are written through tools; cycles,
//! milestones, documents, releases and initiatives are seeded through the
//! store's own functions and read through tools.

use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use super::{
    Caller, Page, Store, StoreError, Writer, Written, all, bump, check_fresh, find_issue,
    find_team, is_constraint, json_list, new_id, non_empty, one, one_of, page_limit, required,
};
use crate::vocabulary::{HEALTH, PROJECT_STATUSES};

// The store's methods for these entities, by kind.
mod cycles;
mod documents;
mod projects;

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
