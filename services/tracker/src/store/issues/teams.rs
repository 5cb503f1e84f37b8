//! Teams: creation, cut-over from Linear with imported issues, and which
//! references the store owns.

use super::*;

impl Store {
    /// Creates a team with a display key (`TEAM` in `TEAM-n`).
    pub fn create_team(&mut self, key: &str, name: &str, actor: &str) -> Result<Team, StoreError> {
        valid_team_key(key)?;
        let who = Writer { actor, role: None };
        let written = self.write(who, "create_team", None, |w| {
            let team = Team {
                id: new_id(),
                key: key.into(),
                name: name.into(),
                cut_over: false,
            };
            w.execute(
                "INSERT INTO teams (id, key, name, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![team.id, team.key, team.name, w.now],
            )
            .map_err(|e| {
                if is_constraint(&e) {
                    StoreError::Conflict(format!("team {key} exists"))
                } else {
                    StoreError::Sqlite(e)
                }
            })?;
            w.change("team", &team.id, "create")?;
            Ok(team)
        })?;
        Ok(written.value)
    }

    /// Creates a team cut over from Linear, or marks an existing team cut
    /// over: imported issues keep their Linear identifiers, and issues
    /// created here get `LOCAL-TEAM-n`.
    pub fn cut_over_team(
        &mut self,
        key: &str,
        name: &str,
        actor: &str,
    ) -> Result<Team, StoreError> {
        valid_team_key(key)?;
        let who = Writer { actor, role: None };
        let written = self.write(who, "cut_over_team", None, |w| {
            let existing = one(
                w,
                "SELECT * FROM teams WHERE key = ?1",
                params![key],
                team_from_row,
            )?;
            let team = match existing {
                Some(mut t) => {
                    w.execute(
                        "UPDATE teams SET cut_over = 1, name = ?2 WHERE id = ?1",
                        params![t.id, name],
                    )?;
                    t.cut_over = true;
                    t.name = name.into();
                    w.change("team", &t.id, "cut-over")?;
                    t
                }
                None => {
                    let t = Team {
                        id: new_id(),
                        key: key.into(),
                        name: name.into(),
                        cut_over: true,
                    };
                    w.execute(
                        "INSERT INTO teams (id, key, name, created_at, cut_over) VALUES (?1, ?2, ?3, ?4, 1)",
                        params![t.id, t.key, t.name, w.now],
                    )?;
                    w.change("team", &t.id, "create")?;
                    t
                }
            };
            Ok(team)
        })?;
        Ok(written.value)
    }

    /// Imports an issue into a cut-over team, keeping its Linear identifier
    /// (`VUH-12`) and Linear UUID.
    #[allow(clippy::too_many_arguments)]
    pub fn import_issue(
        &mut self,
        team_key: &str,
        identifier: &str,
        linear_uuid: &str,
        title: &str,
        description: &str,
        state: &str,
        actor: &str,
    ) -> Result<Issue, StoreError> {
        let (state, state_type) = resolve_state(Some(state))?;
        if title.trim().is_empty() || linear_uuid.trim().is_empty() {
            return Err(StoreError::Invalid(
                "an imported issue needs a title and its Linear UUID".into(),
            ));
        }
        let who = Writer { actor, role: None };
        let written = self.write(who, "import_issue", None, |w| {
            let team = find_team(w, team_key)?;
            if !team.cut_over {
                return Err(StoreError::Invalid(format!(
                    "team {} is not cut over from Linear",
                    team.key
                )));
            }
            let number = identifier
                .strip_prefix(&format!("{}-", team.key))
                .and_then(|n| n.parse::<i64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "{identifier} is not an identifier of team {}",
                        team.key
                    ))
                })?;
            let issue = Issue {
                id: new_id(),
                identifier: identifier.to_string(),
                team_id: team.id,
                title: title.into(),
                description: description.into(),
                state,
                state_type,
                priority: 0,
                assignee: None,
                labels: Vec::new(),
                parent_id: None,
                cycle: None,
                milestone: None,
                project_id: None,
                linear_id: Some(linear_uuid.to_string()),
                created_by: actor.into(),
                created_at: w.now,
                updated_at: w.now,
            };
            insert_issue(w, &issue, number).map_err(|e| match e {
                StoreError::Sqlite(e) if is_constraint(&e) => StoreError::Conflict(format!(
                    "{identifier} or Linear issue {linear_uuid} is already here"
                )),
                e => e,
            })?;
            w.change("issue", &issue.id, "import")?;
            Ok(issue)
        })?;
        Ok(written.value)
    }

    /// Whether a reference names an item of a cut-over team in this store:
    /// an issue (identifier, UUID or Linear UUID), the team (key or id) or
    /// one of its projects (id or name). The host routes such calls here.
    pub fn owns_item(&self, reference: &str) -> Result<bool, StoreError> {
        let reference = reference.trim();
        if reference.is_empty() {
            return Ok(false);
        }
        let hit: Option<i64> = self
            .conn
            .query_row(
                "SELECT 1 FROM issues i JOIN teams t ON t.id = i.team_id
                   WHERE t.cut_over = 1 AND (i.id = ?1 OR i.identifier = upper(?1) OR i.linear_id = ?1)
                 UNION ALL
                 SELECT 1 FROM teams WHERE cut_over = 1 AND (key = upper(?1) OR id = ?1)
                 UNION ALL
                 SELECT 1 FROM projects p JOIN teams t ON t.id = p.team_id
                   WHERE t.cut_over = 1 AND (p.id = ?1 OR lower(p.name) = lower(?1))
                 LIMIT 1",
                params![reference],
                |r| r.get(0),
            )
            .optional()?;
        Ok(hit.is_some())
    }

    /// A team by key, id or name.
    pub fn team(&self, key_or_id: &str) -> Result<Team, StoreError> {
        find_team(&self.conn, key_or_id)
    }

    /// Teams by key, optionally whose key or name contains `query`.
    pub fn teams(&self, query: Option<&str>, limit: Option<i64>) -> Result<Vec<Team>, StoreError> {
        all(
            &self.conn,
            "SELECT * FROM teams
             WHERE ?1 IS NULL OR instr(lower(key), lower(?1)) > 0 OR instr(lower(name), lower(?1)) > 0
             ORDER BY key LIMIT ?2",
            params![query, page_limit(limit)],
            team_from_row,
        )
    }
}
