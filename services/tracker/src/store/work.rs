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

    /// Takes, renews or releases a lease on an issue. A live lease held by
    /// someone else is a conflict until it expires. Limited roles hold
    /// leases only as themselves.
    pub fn save_lease(
        &mut self,
        caller: &Caller,
        input: SaveLease,
    ) -> Result<Written<LeaseResult>, StoreError> {
        let holder = non_empty(input.holder.as_deref())
            .unwrap_or(&caller.actor)
            .to_string();
        caller
            .who()
            .own_only(&holder, "holding a lease for someone else")?;
        let ttl = input.ttl_ms.unwrap_or(DEFAULT_LEASE_MS);
        if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&ttl) {
            return Err(StoreError::Invalid(format!(
                "ttlMs is {MIN_LEASE_MS} to {MAX_LEASE_MS}"
            )));
        }
        let release = input.release.unwrap_or(false);
        let key = input.idempotency_key.clone();
        self.write(caller.who(), "save_lease", key.as_deref(), |w| {
            let issue = find_issue(w, &input.issue_id)?;
            let existing = one(
                w,
                "SELECT * FROM leases WHERE issue_id = ?1",
                params![issue.id],
                lease_from_row,
            )?;
            if let Some(l) = &existing
                && l.holder != holder
                && l.expires_at > w.now
            {
                return Err(StoreError::Conflict(format!(
                    "{} is leased by {} until {}",
                    issue.identifier, l.holder, l.expires_at
                )));
            }
            if release {
                return match existing {
                    None => {
                        w.touch("lease", &issue.id);
                        Ok(LeaseResult {
                            lease: None,
                            released: false,
                        })
                    }
                    Some(_) => {
                        w.execute("DELETE FROM leases WHERE issue_id = ?1", params![issue.id])?;
                        w.change("lease", &issue.id, "release")?;
                        Ok(LeaseResult {
                            lease: None,
                            released: true,
                        })
                    }
                };
            }
            let renewing = existing
                .as_ref()
                .filter(|l| l.holder == holder && l.expires_at > w.now);
            let lease = Lease {
                issue_id: issue.id.clone(),
                holder: holder.clone(),
                expires_at: w.now + ttl,
                created_at: renewing.map_or(w.now, |l| l.created_at),
                updated_at: w.now,
            };
            w.execute(
                "INSERT INTO leases (issue_id, holder, expires_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (issue_id) DO UPDATE SET holder = ?2, expires_at = ?3, created_at = ?4, updated_at = ?5",
                params![
                    lease.issue_id,
                    lease.holder,
                    lease.expires_at,
                    lease.created_at,
                    lease.updated_at
                ],
            )?;
            w.change(
                "lease",
                &issue.id,
                if renewing.is_some() { "renew" } else { "claim" },
            )?;
            Ok(LeaseResult {
                lease: Some(lease),
                released: false,
            })
        })
    }

    /// The live lease on an issue, if any.
    pub fn lease(&self, issue: &str) -> Result<Option<Lease>, StoreError> {
        let id = self.issue(issue)?.id;
        one(
            &self.conn,
            "SELECT * FROM leases WHERE issue_id = ?1 AND expires_at > ?2",
            params![id, self.now()],
            lease_from_row,
        )
    }

    /// The issue UUIDs whose live leases `holder` holds.
    pub fn leases_held_by(&self, holder: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT issue_id FROM leases WHERE holder = ?1 AND expires_at > ?2 ORDER BY issue_id",
        )?;
        let rows = stmt.query_map(params![holder, self.now()], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Unstarted issues with no live lease, by priority (urgent first, none
    /// last) then age.
    pub fn ready_issues(
        &self,
        team: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<Issue>, StoreError> {
        let team_id = match team {
            Some(t) => Some(self.team(t)?.id),
            None => None,
        };
        all(
            &self.conn,
            "SELECT * FROM issues i
             WHERE i.state_type = 'unstarted' AND (?1 IS NULL OR i.team_id = ?1)
               AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.issue_id = i.id AND l.expires_at > ?2)
             ORDER BY CASE i.priority WHEN 0 THEN 5 ELSE i.priority END, i.created_at, i.id
             LIMIT ?3",
            params![team_id, self.now(), page_limit(limit)],
            issue_from_row,
        )
    }

    /// Issues whose state disagrees with their evidence. Imported issues
    /// untouched since their import are not drift.
    pub fn drift(&self, team: Option<&str>, limit: Option<i64>) -> Result<Vec<Drift>, StoreError> {
        let team_id = match team {
            Some(t) => Some(self.team(t)?.id),
            None => None,
        };
        let now = self.now();
        let limit = page_limit(limit);
        let mut out = Vec::new();
        let started = all(
            &self.conn,
            "SELECT * FROM issues i
             WHERE i.state_type = 'started' AND (?1 IS NULL OR i.team_id = ?1)
               AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.issue_id = i.id AND l.expires_at > ?2)
               AND max(i.updated_at, COALESCE((SELECT MAX(e.created_at) FROM issue_events e
                                               WHERE e.issue_id = i.id), 0)) < ?3
             ORDER BY i.updated_at LIMIT ?4",
            params![team_id, now, now - IDLE_MS, limit],
            issue_from_row,
        )?;
        for i in started {
            out.push(drift_of(
                &i,
                "started-idle",
                format!(
                    "{} is {} with no live lease and no event or update for 24 hours",
                    i.identifier, i.state
                ),
            ));
        }
        let unverified = all(
            &self.conn,
            "SELECT * FROM issues i
             WHERE i.state_type = 'completed' AND (?1 IS NULL OR i.team_id = ?1)
               AND NOT (i.linear_id IS NOT NULL AND i.updated_at = i.created_at)
               AND NOT EXISTS (SELECT 1 FROM issue_events e
                               WHERE e.issue_id = i.id AND e.stage = 'owner-verified')
             ORDER BY i.updated_at LIMIT ?2",
            params![team_id, limit],
            issue_from_row,
        )?;
        for i in unverified {
            out.push(drift_of(
                &i,
                "completed-unverified",
                format!(
                    "{} is {} without an owner-verified event",
                    i.identifier, i.state
                ),
            ));
        }
        let leased = all(
            &self.conn,
            "SELECT i.* FROM issues i JOIN leases l ON l.issue_id = i.id
             WHERE i.state_type IN ('completed', 'canceled') AND (?1 IS NULL OR i.team_id = ?1)
               AND l.expires_at > ?2
             ORDER BY i.updated_at LIMIT ?3",
            params![team_id, now, limit],
            issue_from_row,
        )?;
        for i in leased {
            out.push(drift_of(
                &i,
                "leased-but-closed",
                format!("{} is {} but still has a live lease", i.identifier, i.state),
            ));
        }
        out.truncate(limit as usize);
        Ok(out)
    }

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

fn drift_of(i: &Issue, reason: &str, detail: String) -> Drift {
    Drift {
        issue: DriftIssue {
            id: i.id.clone(),
            identifier: i.identifier.clone(),
            title: i.title.clone(),
            state: i.state.clone(),
        },
        reason: reason.into(),
        detail,
    }
}
