//! Leases on issues, what is ready to pick up, and drift.

use super::*;

pub(super) fn drift_of(i: &Issue, reason: &str, detail: String) -> Drift {
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

/// Where a lease is held: on a built-in issue, or on a saved Linear route's
/// issue (Linear keeps no leases), under the connected resource and the
/// project it was taken with and the reference exactly as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseSlot {
    Issue,
    Route { resource: String, project: String },
}

/// The longest route reference or scope part kept.
const MAX_ROUTE_PART: usize = 200;

impl LeaseSlot {
    fn check(&self) -> Result<(), StoreError> {
        if let LeaseSlot::Route { resource, project } = self
            && [resource, project]
                .iter()
                .any(|p| p.is_empty() || p.len() > MAX_ROUTE_PART)
        {
            return Err(StoreError::Invalid(
                "a Linear route names its connected resource and project".into(),
            ));
        }
        Ok(())
    }
}

/// The lease row of one key in its slot.
fn held(w: &Tx<'_>, slot: &LeaseSlot, id: &str) -> Result<Option<Lease>, StoreError> {
    match slot {
        LeaseSlot::Issue => one(
            w,
            "SELECT * FROM leases WHERE issue_id = ?1",
            params![id],
            lease_from_row,
        ),
        LeaseSlot::Route { resource, project } => one(
            w,
            "SELECT issue_ref AS issue_id, holder, expires_at, created_at, updated_at
             FROM route_leases WHERE resource = ?1 AND project = ?2 AND issue_ref = ?3",
            params![resource, project, id],
            lease_from_row,
        ),
    }
}

impl Store {
    /// Takes, renews or releases a lease on an issue. A live lease held by
    /// someone else is a conflict until it expires. Limited roles hold
    /// leases only as themselves.
    pub fn save_lease(
        &mut self,
        caller: &Caller,
        input: SaveLease,
    ) -> Result<Written<LeaseResult>, StoreError> {
        self.save_lease_in(caller, &LeaseSlot::Issue, input)
    }

    /// [`Store::save_lease`] in a slot: a route lease keys its issue by the
    /// reference as given (never resolved to a built-in issue).
    pub fn save_lease_in(
        &mut self,
        caller: &Caller,
        slot: &LeaseSlot,
        input: SaveLease,
    ) -> Result<Written<LeaseResult>, StoreError> {
        slot.check()?;
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
            // The key the lease is held under, its name in messages, and
            // its entity in the change log.
            let (id, shown, entity, logged) = match slot {
                LeaseSlot::Issue => {
                    let issue = find_issue(w, &input.issue_id)?;
                    (issue.id.clone(), issue.identifier, "lease", issue.id)
                }
                LeaseSlot::Route { resource, project } => {
                    let reference = input.issue_id.trim().to_string();
                    if reference.is_empty() || reference.len() > MAX_ROUTE_PART {
                        return Err(StoreError::Invalid(format!(
                            "issueId is 1 to {MAX_ROUTE_PART} bytes"
                        )));
                    }
                    let logged = format!("linear:{resource}:{project}/{reference}");
                    (reference.clone(), reference, "route_lease", logged)
                }
            };
            let existing = held(w, slot, &id)?;
            if let Some(l) = &existing
                && l.holder != holder
                && l.expires_at > w.now
            {
                return Err(StoreError::Conflict(format!(
                    "{shown} is leased by {} until {}",
                    l.holder, l.expires_at
                )));
            }
            if release {
                return match existing {
                    None => {
                        w.touch(entity, &logged);
                        Ok(LeaseResult {
                            lease: None,
                            released: false,
                        })
                    }
                    Some(_) => {
                        match slot {
                            LeaseSlot::Issue => {
                                w.execute("DELETE FROM leases WHERE issue_id = ?1", params![id])?
                            }
                            LeaseSlot::Route { resource, project } => w.execute(
                                "DELETE FROM route_leases
                                 WHERE resource = ?1 AND project = ?2 AND issue_ref = ?3",
                                params![resource, project, id],
                            )?,
                        };
                        w.change(entity, &logged, "release")?;
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
                issue_id: id.clone(),
                holder: holder.clone(),
                expires_at: w.now + ttl,
                created_at: renewing.map_or(w.now, |l| l.created_at),
                updated_at: w.now,
            };
            match slot {
                LeaseSlot::Issue => w.execute(
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
                )?,
                LeaseSlot::Route { resource, project } => w.execute(
                    "INSERT INTO route_leases
                     (resource, project, issue_ref, holder, expires_at, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (resource, project, issue_ref) DO UPDATE
                     SET holder = ?4, expires_at = ?5, created_at = ?6, updated_at = ?7",
                    params![
                        resource,
                        project,
                        lease.issue_id,
                        lease.holder,
                        lease.expires_at,
                        lease.created_at,
                        lease.updated_at
                    ],
                )?,
            };
            w.change(
                entity,
                &logged,
                if renewing.is_some() { "renew" } else { "claim" },
            )?;
            Ok(LeaseResult {
                lease: Some(lease),
                released: false,
            })
        })
    }

    /// The live route leases `holder` holds in a Linear project, each with
    /// the connected resource it was taken under.
    pub fn route_leases_held_by(
        &self,
        holder: &str,
        project: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT resource, issue_ref FROM route_leases
             WHERE holder = ?1 AND project = ?2 AND expires_at > ?3
             ORDER BY resource, issue_ref",
        )?;
        let rows = stmt.query_map(params![holder, project, self.now()], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Live leases by scope (`builtin:TEAM`, `linear:RESOURCE:PROJECT`) and
    /// holder, with their counts.
    pub fn lease_ownership(&self) -> Result<Vec<(String, String, u32)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT 'builtin:' || t.key, l.holder, COUNT(*) FROM leases l
               JOIN issues i ON i.id = l.issue_id JOIN teams t ON t.id = i.team_id
               WHERE l.expires_at > ?1 GROUP BY 1, 2
             UNION ALL
             SELECT 'linear:' || resource || ':' || project, holder, COUNT(*) FROM route_leases
               WHERE expires_at > ?1 GROUP BY 1, 2
             ORDER BY 1, 2",
        )?;
        let rows = stmt.query_map(params![self.now()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u32))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
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
}
