//! Projects: projects, status updates, milestones, initiatives and documents.

use super::*;

pub(super) fn invoke(
    store: &mut Store,
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    match tool {
        "get_project" => {
            let a: Query = parse(tool, args)?;
            Ok(json!({"project": store.project(&a.query)?}))
        }
        "list_projects" => {
            let a: ListProjects = parse(tool, args)?;
            if let Some(s) = &a.state
                && !PROJECT_STATUSES.contains(&s.as_str())
            {
                return Err(StoreError::Invalid(format!("unknown project status {s}")));
            }
            let page = store.projects(&ProjectQuery {
                team: a.team,
                state: a.state,
                text: a.query,
                limit: a.limit,
                cursor: a.cursor,
            })?;
            Ok(json!({"projects": page.items, "cursor": page.cursor, "hasMore": page.has_more}))
        }
        "save_project" => {
            let a: SaveProject = parse(tool, args)?;
            written("project", store.save_project(caller, a)?)
        }
        "list_project_statuses" => {
            let _: Empty = parse(tool, args)?;
            let statuses: Vec<Value> = PROJECT_STATUSES
                .iter()
                .enumerate()
                .map(|(i, name)| json!({"name": name, "position": i}))
                .collect();
            Ok(json!({ "statuses": statuses }))
        }
        "get_status_updates" => {
            let a: GetStatusUpdates = parse(tool, args)?;
            let updates =
                store.status_updates(a.project_id.as_deref(), a.id.as_deref(), a.limit)?;
            Ok(json!({ "statusUpdates": updates }))
        }
        "save_status_update" => {
            let a: SaveStatusUpdate = parse(tool, args)?;
            written("statusUpdate", store.save_status_update(caller, a)?)
        }
        "list_milestones" => {
            let a: ListMilestones = parse(tool, args)?;
            Ok(json!({"milestones": store.milestones(a.project.as_deref(), a.limit)?}))
        }
        "get_milestone" => {
            let a: Id = parse(tool, args)?;
            Ok(json!({"milestone": store.milestone(&a.id)?}))
        }
        "list_initiatives" => {
            let a: ListInitiatives = parse(tool, args)?;
            let list = store.initiatives(a.query.as_deref(), a.status.as_deref(), a.limit)?;
            Ok(json!({ "initiatives": list }))
        }
        "get_document" => {
            let a: Id = parse(tool, args)?;
            Ok(json!({"document": store.document(&a.id)?}))
        }
        "list_documents" => {
            let a: ListDocuments = parse(tool, args)?;
            let docs = store.documents(
                a.project.as_deref(),
                a.issue_id.as_deref(),
                a.query.as_deref(),
                a.limit,
            )?;
            Ok(json!({ "documents": docs }))
        }
        other => Err(no_implementation(other)),
    }
}
