//! Issues, comments and relations.

use super::*;

pub(super) fn issue_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "get_issue",
            READ | HISTORY,
            "Get one issue by identifier, UUID or Linear UUID.\n\
             Returns {issue}: id, identifier, title, description, state and stateType, priority \
             (0 none, 1 urgent .. 4 low), assignee, labels, projectId, cycle, milestone, parentId, \
             createdBy, createdAt and updatedAt (ms). With includeRelations also {relations: {parent, children}}.",
            vec![
                req("id", issue_ref("The issue.")),
                opt(
                    "includeRelations",
                    boolean("Also return the parent issue and the child issues."),
                ),
            ],
        ),
        tool(
            "list_issues",
            READ | HISTORY,
            "List issues, filtered by team, state, assignee, label, project, cycle or parent.\n\
             Returns {issues, cursor, hasMore}, most recently updated first unless orderBy is createdAt; \
             pass cursor back for the next page.",
            vec![
                team_filter(),
                opt(
                    "state",
                    string(
                        "A state name (In Progress) or type (backlog, unstarted, started, completed, canceled).",
                    ),
                ),
                opt("assignee", string("Assignee name, or \"me\".")),
                opt("label", string("Only issues carrying this label name.")),
                opt("project", string("Project id or name.")),
                opt("cycle", string("Cycle id, name or number.")),
                opt("parentId", issue_ref("Only sub-issues of this issue.")),
                opt(
                    "query",
                    string("Text the identifier, title or description contains."),
                ),
                limit(),
                page_cursor(),
                opt(
                    "orderBy",
                    one_of(
                        "Sort key, newest first (default updatedAt).",
                        &["createdAt", "updatedAt"],
                    ),
                ),
                opt(
                    "includeArchived",
                    boolean(
                        "Accepted for Linear compatibility; the built-in tracker archives nothing.",
                    ),
                ),
            ],
        ),
        tool(
            "search_issues",
            READ | HISTORY,
            "Search issues by text in the identifier, title or description.\n\
             Returns {issues, cursor, hasMore}, most recently updated first.",
            vec![
                req("query", string("The text to find (case-insensitive).")),
                team_filter(),
                opt("state", string("A state name or type.")),
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
            "save_issue",
            UPDATE,
            "Create an issue (without id; team and title required) or update one (id).\n\
             Fields left out stay as they are; an empty string clears an optional field. \
             Returns {issue, replayed}.",
            vec![
                opt("id", issue_ref("The issue to update; leave out to create.")),
                opt("team", string("Team key, id or name (required to create).")),
                opt("title", text("Title.", 500)),
                opt("description", clearable("Markdown description.")),
                opt("state", state_prop(true)),
                opt(
                    "priority",
                    integer("0 none, 1 urgent, 2 high, 3 medium, 4 low.", 0, 4),
                ),
                opt(
                    "assignee",
                    clearable("Assignee name, or \"me\"; empty to unassign."),
                ),
                opt(
                    "labels",
                    json!({"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 50,
                           "description": "Label names; replaces the issue's labels."}),
                ),
                opt(
                    "parentId",
                    clearable("Parent issue identifier or id; empty to clear."),
                ),
                opt("project", clearable("Project id or name; empty to clear.")),
                opt(
                    "cycle",
                    clearable("Cycle id, name or number; empty to clear."),
                ),
                opt(
                    "milestone",
                    clearable("Milestone id or name; empty to clear."),
                ),
            ],
        ),
        tool(
            "save_issue_status",
            UPDATE | LEAD,
            "Set an issue's workflow state, completed states included (lead only).\n\
             Returns {issue, replayed}.",
            vec![
                req("id", issue_ref("The issue.")),
                req("state", state_prop(true)),
            ],
        ),
        tool(
            "list_comments",
            READ | HISTORY,
            "List an issue's comments, oldest first.\n\
             Returns {comments: [{id, issueId, body, author, createdAt, updatedAt}]}.",
            vec![req("issueId", issue_ref("The issue.")), limit()],
        ),
        tool(
            "save_comment",
            UPDATE,
            "Add a comment to an issue, or edit one of your comments (id).\n\
             Returns {comment, replayed}.",
            vec![
                opt("id", string("The comment to edit; leave out to add one.")),
                opt("issueId", issue_ref("The issue (required to add).")),
                req("body", text("Markdown body.", 65_536)),
            ],
        ),
        tool(
            "create_comment",
            WRITE,
            "Add a comment to an issue (save_comment without id).\n\
             Returns {comment, replayed}.",
            vec![
                req("issueId", issue_ref("The issue.")),
                req("body", text("Markdown body.", 65_536)),
            ],
        ),
        tool(
            "list_issue_statuses",
            READ,
            "List the workflow states issues can be in.\n\
             Returns {statuses: [{name, type, position}]}; every team has the same states.",
            vec![team_filter()],
        ),
        tool(
            "list_issue_labels",
            READ,
            "List issue labels, workspace-wide and per team.\n\
             Returns {labels: [{id, name, color, description, teamId}]}.",
            vec![
                team_filter(),
                opt("query", string("Text the name contains.")),
                limit(),
            ],
        ),
        tool(
            "save_issue_label",
            UPDATE,
            "Create a label (name; teamId makes it a team label) or update one (id).\n\
             Returns {label, replayed}.",
            vec![
                opt("id", string("The label to update; leave out to create.")),
                opt("name", text("Label name.", 100)),
                opt("color", color()),
                opt("description", clearable("What the label means.")),
                opt(
                    "teamId",
                    string("Team key, id or name; leave out for a workspace label."),
                ),
            ],
        ),
        tool(
            "create_issue_label",
            WRITE,
            "Create a label (save_issue_label without id).\n\
             Returns {label, replayed}.",
            vec![
                req("name", text("Label name.", 100)),
                opt("color", color()),
                opt("description", clearable("What the label means.")),
                opt(
                    "teamId",
                    string("Team key, id or name; leave out for a workspace label."),
                ),
            ],
        ),
    ]
}
