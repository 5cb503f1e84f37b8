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

impl Store {
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
}
