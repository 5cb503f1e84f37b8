//! The lead's inbox.

use super::*;

pub(super) fn inbox_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "list_inbox",
            READ | LEAD,
            "List the lead's inbox: open asks, guided reviews ready for the owner, and issues In Review awaiting owner verification (lead only).\n\
             Returns {items: [{id, kind (ask, guided-review, owner-verification), issueId, identifier, title, createdAt, state, snoozeUntil, resolved}]}.",
            vec![
                opt(
                    "includeResolved",
                    boolean("Also list answered asks and archived or snoozed items."),
                ),
                limit(),
            ],
        ),
        tool(
            "get_inbox_item",
            READ | LEAD,
            "Get one inbox item with what it points at (lead only).\n\
             Returns {item, ask | review | issue}.",
            vec![req(
                "id",
                string("Inbox item id (ask:..., review:... or verify:...)."),
            )],
        ),
        tool(
            "save_inbox_item",
            WRITE | LEAD,
            "Mark an inbox item read, snoozed (until snoozeUntil) or archived (lead only).\nReturns {item, replayed}.",
            vec![
                req("id", string("Inbox item id.")),
                req("state", one_of("The new state.", INBOX_STATES)),
                opt(
                    "snoozeUntil",
                    json!({"type": "integer", "minimum": 0,
                           "description": "When a snoozed item returns (ms since the epoch); required to snooze."}),
                ),
            ],
        ),
        tool(
            "post_inbox_answer",
            WRITE | LEAD,
            "Answer an ask from the inbox (lead only): resolves it and records a note event on its issue.\n\
             Returns {ask, event, replayed}.",
            vec![
                req("id", string("The ask's inbox item id (ask:...) or ask id.")),
                req("answer", text("The answer, in Markdown.", 65_536)),
            ],
        ),
    ]
}
