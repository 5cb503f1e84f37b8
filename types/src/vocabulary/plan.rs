//! Planning: cycles, initiatives and releases.

use super::*;

pub(super) fn plan_tools() -> Vec<ToolDef> {
    vec![
        tool(
            "list_cycles",
            READ,
            "List cycles, by start.\n\
             Returns {cycles: [{id, teamId, number, name, startsAt, endsAt}]}.",
            vec![
                opt("teamId", string("Team key, id or name.")),
                opt(
                    "type",
                    one_of(
                        "Only the current, the previous or the next cycle.",
                        &["current", "previous", "next"],
                    ),
                ),
            ],
        ),
        tool(
            "get_cycle",
            READ,
            "Get one cycle by id.\nReturns {cycle}.",
            vec![req("id", string("Cycle id."))],
        ),
        tool(
            "list_releases",
            READ,
            "List releases, newest first.\n\
             Returns {releases: [{id, name, notes, issueIds, releasedAt, createdBy}]}.",
            vec![limit()],
        ),
        tool(
            "get_release",
            READ,
            "Get one release by id or name.\nReturns {release}.",
            vec![req("id", string("Release id or name."))],
        ),
    ]
}
