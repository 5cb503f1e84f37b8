//! Teams, users, the change log and the audit log.

use super::*;

pub(super) fn directory_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "get_user",
            READ,
            "Get a user: \"me\" is you; other names are actors this tracker has seen.\n\
             Returns {user: {id, name, isMe, writes, lastSeenAt}}.",
            vec![req("query", string("\"me\", or a user's name."))],
        ),
        tool(
            "list_users",
            READ,
            "List the users this tracker has seen (writers, assignees) and you.\n\
             Returns {users: [{id, name, isMe, writes, lastSeenAt}]}.",
            vec![opt("query", string("Text the name contains.")), limit()],
        ),
        tool(
            "get_team",
            READ,
            "Get one team by key, id or name.\n\
             Returns {team: {id, key, name, cutOver}}; a cut-over team's issues were imported from Linear.",
            vec![req("query", string("Team key, id or name."))],
        ),
        tool(
            "list_teams",
            READ,
            "List teams.\nReturns {teams: [{id, key, name, cutOver}]}.",
            vec![
                opt("query", string("Text the key or name contains.")),
                limit(),
            ],
        ),
        tool(
            "get_write_receipt",
            READ,
            "Get the recorded result of one of your writes by its idempotency key.\n\
             Returns {receipt: {idempotencyKey, tool, result, createdAt}}.",
            vec![req(
                "idempotencyKey",
                json!({"type": "string", "minLength": 1, "maxLength": 200,
                       "description": "The key you passed to the write."}),
            )],
        ),
        tool(
            "list_audit_events",
            READ,
            "List the audit log of writes, newest first: who (actor, role) called which tool on what.\n\
             Returns {events: [{seq, actor, role, tool, entity, entityId, at}], cursor}; pass cursor for older events.",
            vec![
                opt("actor", string("Only this actor's writes.")),
                opt(
                    "cursor",
                    json!({"type": "integer", "minimum": 0,
                           "description": "Return events older than this seq (from a previous result)."}),
                ),
                limit(),
            ],
        ),
        tool(
            "list_changes",
            READ,
            "List changes (every write, in commit order) after a cursor, waiting up to waitMs for one.\n\
             Returns {changes: [{seq, entity, entityId, action, actor, at}], cursor}; pass cursor back to continue.",
            vec![
                opt(
                    "cursor",
                    json!({"type": "integer", "minimum": 0,
                           "description": "Return changes after this seq (exclusive, default 0)."}),
                ),
                opt(
                    "limit",
                    integer(
                        "At most this many changes (default 100).",
                        1,
                        MAX_CHANGES_LIMIT,
                    ),
                ),
                opt(
                    "waitMs",
                    integer(
                        "When nothing is newer than cursor, wait up to this long for a commit (default 0).",
                        0,
                        MAX_WAIT_MS,
                    ),
                ),
            ],
        ),
    ]
}
