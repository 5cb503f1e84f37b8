//! Projects, milestones, labels, documents and status updates.

use super::*;

pub(super) fn project_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "get_project",
            READ,
            "Get one project by id or name.\n\
             Returns {project}: id, name, teamId, state, description, lead, targetDate, createdAt, updatedAt.",
            vec![req("query", string("Project id or name."))],
        ),
        tool(
            "list_projects",
            READ,
            "List projects, filtered by team, state or name.\n\
             Returns {projects, cursor, hasMore}, most recently updated first.",
            vec![
                team_filter(),
                opt("state", one_of("Project status.", PROJECT_STATUSES)),
                opt("query", string("Text the name contains.")),
                limit(),
                page_cursor(),
                opt(
                    "includeArchived",
                    boolean(
                        "Accepted for Linear compatibility; the built-in tracker archives nothing.",
                    ),
                ),
            ],
        ),
        tool(
            "save_project",
            UPDATE | LEAD,
            "Create a project (name required) or update one (id) (lead only).\n\
             Returns {project, replayed}.",
            vec![
                opt(
                    "id",
                    string("Project id or name to update; leave out to create."),
                ),
                opt("name", text("Project name, unique in this tracker.", 200)),
                opt("team", string("Team key, id or name.")),
                opt(
                    "state",
                    one_of("Project status (default backlog).", PROJECT_STATUSES),
                ),
                opt("description", clearable("Markdown description.")),
                opt(
                    "lead",
                    clearable("The project lead's name; empty to clear."),
                ),
                opt(
                    "targetDate",
                    json!({"type": "string", "pattern": "^(\\d{4}-\\d{2}-\\d{2})?$",
                           "description": "Target date, YYYY-MM-DD; empty to clear."}),
                ),
            ],
        ),
        tool(
            "list_project_statuses",
            READ,
            "List the statuses a project can be in.\nReturns {statuses: [{name, position}]}.",
            vec![],
        ),
        tool(
            "get_status_updates",
            READ,
            "List project status updates, newest first, for one project or all (or one by id).\n\
             Returns {statusUpdates: [{id, projectId, health, body, author, createdAt, updatedAt}]}.",
            vec![
                opt("projectId", string("Project id or name.")),
                opt("id", string("One status update by id.")),
                limit(),
            ],
        ),
        tool(
            "save_status_update",
            UPDATE,
            "Post a project status update (projectId, health, body) or edit one of yours (id).\n\
             Returns {statusUpdate, replayed}.",
            vec![
                opt(
                    "id",
                    string("The status update to edit; leave out to post one."),
                ),
                opt(
                    "projectId",
                    string("Project id or name (required to post)."),
                ),
                opt("health", one_of("Project health.", HEALTH)),
                opt("body", text("Markdown body.", 65_536)),
            ],
        ),
        tool(
            "list_milestones",
            READ,
            "List project milestones, by target date.\n\
             Returns {milestones: [{id, projectId, name, description, targetDate}]}.",
            vec![opt("project", string("Project id or name.")), limit()],
        ),
        tool(
            "get_milestone",
            READ,
            "Get one project milestone by id.\nReturns {milestone}.",
            vec![req("id", string("Milestone id."))],
        ),
        tool(
            "list_initiatives",
            READ,
            "List initiatives.\n\
             Returns {initiatives: [{id, name, description, status, targetDate}]}.",
            vec![
                opt("query", string("Text the name contains.")),
                opt("status", string("Only initiatives with this status.")),
                limit(),
            ],
        ),
        tool(
            "get_document",
            READ,
            "Get one document by id or title.\n\
             Returns {document: {id, title, content, projectId, issueId, createdBy, createdAt, updatedAt}}.",
            vec![req("id", string("Document id or exact title."))],
        ),
        tool(
            "list_documents",
            READ,
            "List documents, filtered by project, issue or title.\n\
             Returns {documents} without their content, most recently updated first.",
            vec![
                opt("project", string("Project id or name.")),
                opt(
                    "issueId",
                    issue_ref("Only documents attached to this issue."),
                ),
                opt("query", string("Text the title contains.")),
                limit(),
            ],
        ),
    ]
}
