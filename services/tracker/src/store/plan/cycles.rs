//! Cycles and milestones.

use super::*;

impl Store {
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
        let who = Writer { actor, role: None };
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
        let who = Writer { actor, role: None };
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
}
