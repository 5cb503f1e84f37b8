//! Documents, releases and initiatives.

use super::*;

impl Store {
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
        let who = Writer { actor, role: None };
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
        let who = Writer { actor, role: None };
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
        let who = Writer { actor, role: None };
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
