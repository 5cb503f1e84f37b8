//! The work loop on issues: events, evidence bundles and their checks,
//! asks, leases, runs, the ready queue and drift.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::{
    Caller, Issue, Store, StoreError, Tx, Written, all, bump, check_fresh, find_issue,
    issue_from_row, new_id, non_empty, one, one_of, page_limit, required,
};
use crate::vocabulary::{
    CHECK_OUTCOMES, DEFAULT_LEASE_MS, EVENT_STAGES, MAX_LEASE_MS, MIN_LEASE_MS, OWNER_VERIFIED,
    RUN_ACTIONS, RUN_STATUSES,
};

// The store's methods for these entities, by kind.
mod evidence;
mod leases;
pub use leases::LeaseSlot;
mod runs;

/// How long a started issue may go without a lease or an event before it
/// counts as drift.
pub const IDLE_MS: i64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct IssueEvent {
    pub id: String,
    pub issue_id: String,
    pub stage: String,
    pub body: String,
    pub evidence_bundle_id: Option<String>,
    pub actor: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EvidenceItem {
    pub kind: String,
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceBundle {
    pub id: String,
    pub issue_id: String,
    pub summary: String,
    pub items: Vec<EvidenceItem>,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BundleCheck {
    pub id: String,
    pub bundle_id: String,
    pub name: String,
    pub outcome: String,
    pub detail: String,
    pub actor: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    pub id: String,
    pub issue_id: String,
    pub question: String,
    pub asked_by: String,
    pub created_at: i64,
    pub answer: Option<String>,
    pub answered_by: Option<String>,
    pub answered_at: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub issue_id: String,
    pub holder: String,
    pub expires_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What `save_lease` did: the lease now held (none after a release), and
/// whether a lease was released.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LeaseResult {
    pub lease: Option<Lease>,
    pub released: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub id: String,
    pub issue_id: String,
    pub status: String,
    pub summary: String,
    pub paused: bool,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The short view of an issue in a drift report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DriftIssue {
    pub id: String,
    pub identifier: String,
    pub title: String,
    pub state: String,
}

/// An issue whose state disagrees with its evidence.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    pub issue: DriftIssue,
    /// started-idle, completed-unverified or leased-but-closed.
    pub reason: String,
    pub detail: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PostIssueEvent {
    pub issue_id: String,
    pub stage: String,
    pub body: Option<String>,
    pub evidence_bundle_id: Option<String>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveEvidenceBundle {
    pub id: Option<String>,
    pub issue_id: Option<String>,
    pub summary: Option<String>,
    pub items: Option<Vec<EvidenceItem>>,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PostBundleCheck {
    pub bundle_id: String,
    pub name: String,
    pub outcome: String,
    pub detail: Option<String>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PostIssueAsk {
    pub issue_id: String,
    pub question: String,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveLease {
    pub issue_id: String,
    pub holder: Option<String>,
    pub ttl_ms: Option<i64>,
    pub release: Option<bool>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveRun {
    pub id: Option<String>,
    pub issue_id: Option<String>,
    pub status: Option<String>,
    pub summary: Option<String>,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunControl {
    pub run_id: String,
    pub action: String,
    pub if_updated_at: Option<i64>,
    pub idempotency_key: Option<String>,
}

pub(super) fn event_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IssueEvent> {
    Ok(IssueEvent {
        id: r.get("id")?,
        issue_id: r.get("issue_id")?,
        stage: r.get("stage")?,
        body: r.get("body")?,
        evidence_bundle_id: r.get("evidence_bundle_id")?,
        actor: r.get("actor")?,
        created_at: r.get("created_at")?,
    })
}

fn bundle_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EvidenceBundle> {
    let items: String = r.get("items")?;
    Ok(EvidenceBundle {
        id: r.get("id")?,
        issue_id: r.get("issue_id")?,
        summary: r.get("summary")?,
        items: serde_json::from_str(&items).unwrap_or_default(),
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn check_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BundleCheck> {
    Ok(BundleCheck {
        id: r.get("id")?,
        bundle_id: r.get("bundle_id")?,
        name: r.get("name")?,
        outcome: r.get("outcome")?,
        detail: r.get("detail")?,
        actor: r.get("actor")?,
        created_at: r.get("created_at")?,
    })
}

pub(super) fn ask_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Ask> {
    Ok(Ask {
        id: r.get("id")?,
        issue_id: r.get("issue_id")?,
        question: r.get("question")?,
        asked_by: r.get("asked_by")?,
        created_at: r.get("created_at")?,
        answer: r.get("answer")?,
        answered_by: r.get("answered_by")?,
        answered_at: r.get("answered_at")?,
    })
}

fn lease_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Lease> {
    Ok(Lease {
        issue_id: r.get("issue_id")?,
        holder: r.get("holder")?,
        expires_at: r.get("expires_at")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

fn run_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Run> {
    Ok(Run {
        id: r.get("id")?,
        issue_id: r.get("issue_id")?,
        status: r.get("status")?,
        summary: r.get("summary")?,
        paused: r.get("paused")?,
        created_by: r.get("created_by")?,
        created_at: r.get("created_at")?,
        updated_at: r.get("updated_at")?,
    })
}

pub(super) fn find_bundle(
    conn: &rusqlite::Connection,
    id: &str,
) -> Result<EvidenceBundle, StoreError> {
    one(
        conn,
        "SELECT * FROM evidence_bundles WHERE id = ?1",
        params![id],
        bundle_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("evidence bundle {id}")))
}

pub(super) fn find_ask(conn: &rusqlite::Connection, id: &str) -> Result<Ask, StoreError> {
    one(
        conn,
        "SELECT * FROM asks WHERE id = ?1",
        params![id],
        ask_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("ask {id}")))
}

fn find_run(conn: &rusqlite::Connection, id: &str) -> Result<Run, StoreError> {
    one(
        conn,
        "SELECT * FROM runs WHERE id = ?1",
        params![id],
        run_from_row,
    )?
    .ok_or_else(|| StoreError::NotFound(format!("run {id}")))
}

fn terminal(status: &str) -> bool {
    matches!(status, "succeeded" | "failed" | "canceled")
}

/// Records an issue event inside a write.
pub(super) fn insert_event(
    w: &mut Tx<'_>,
    issue: &Issue,
    stage: &str,
    body: &str,
    bundle: Option<&str>,
) -> Result<IssueEvent, StoreError> {
    let event = IssueEvent {
        id: new_id(),
        issue_id: issue.id.clone(),
        stage: stage.into(),
        body: body.into(),
        evidence_bundle_id: bundle.map(str::to_string),
        actor: w.actor.clone(),
        created_at: w.now,
    };
    w.execute(
        "INSERT INTO issue_events (id, issue_id, stage, body, evidence_bundle_id, actor, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            event.id,
            event.issue_id,
            event.stage,
            event.body,
            event.evidence_bundle_id,
            event.actor,
            event.created_at
        ],
    )?;
    w.change("issue_event", &event.id, "create")?;
    Ok(event)
}
