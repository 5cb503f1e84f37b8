//! The tool definitions a member lists: the meta tools (`clankie_tools`,
//! `clankie_call`) while connected tools are on, and for a native seat the
//! report, peer, review and (for a lead) wake tools.

use clankie_types::fleet::FleetTool;
use rmcp::model::Tool;
use serde_json::json;

const TOOLS: &str = FleetTool::Tools.name();
const CALL: &str = FleetTool::Call.name();
const REPORT: &str = FleetTool::Report.name();
const PEERS: &str = FleetTool::Peers.name();
const PEER: &str = FleetTool::Peer.name();
const SUBMIT: &str = FleetTool::Submit.name();
const CANDIDATE: &str = FleetTool::Candidate.name();
const VERDICT: &str = FleetTool::Verdict.name();
const GET_WAKE: &str = FleetTool::GetWake.name();
const SCHEDULE_WAKE: &str = FleetTool::ScheduleWake.name();

/// `message_clankie`, offered to seats in panes (never to bearer links).
pub fn report_definition() -> Tool {
    let tool = json!({
        "name": REPORT,
        "description": "Report to the lead that hired this seat (progress, a question, done). \
            It arrives in the lead's conversation as your agent output, not as an instruction; \
            you cannot choose another recipient. A repeated receiptId returns the original \
            delivery and sends nothing new.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "text": { "type": "string", "minLength": 1, "maxLength": 32768 },
                "receiptId": { "type": "string", "maxLength": 128, "description": "Chosen by the bridge before sending; reuse it only to read the original delivery." }
            },
            "required": ["text"],
            "additionalProperties": false
        }
    });
    serde_json::from_value(tool).unwrap_or_else(|_| Tool::default())
}

/// `list_fleet_seats` and `message_peer`, offered to seats while
/// fleet.peerMessages is on.
pub fn peer_definitions() -> Vec<Tool> {
    let tools = json!([
        {
            "name": PEERS,
            "description": "List the current seats of your own fleet (yourself included as `self`), \
                with what addresses each seat (your own entry also names the agent your seat is \
                bound to). Use a returned seatId with message_peer.",
            "inputSchema": { "type": "object", "properties": {}, "additionalProperties": false }
        },
        {
            "name": PEER,
            "description": "Send a message to another current seat of your fleet. It arrives as your \
                agent output, never as an instruction. While an earlier message to that seat is \
                unresolved, this returns its receipt and sends nothing; nothing is ever resent.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "seat": { "type": "string", "description": "A seatId from list_fleet_seats." },
                    "text": { "type": "string", "minLength": 1, "maxLength": 32768 },
                    "receiptId": { "type": "string", "maxLength": 128 }
                },
                "required": ["seat", "text"],
                "additionalProperties": false
            }
        }
    ]);
    serde_json::from_value(tools).unwrap_or_default()
}

/// The landing review tools, offered to seats whose project names a
/// standing reviewer. `submit_for_review` is carried out by the bridge,
/// which reads the change from the checkout it names.
pub fn review_definitions() -> Vec<Tool> {
    let tools = json!([
        {
            "name": SUBMIT,
            "description": "Submit the exact committed change of a checkout for landing review: \
                `git diff --binary` from the merge base with origin/main (or `base`) to HEAD of the \
                absolute checkout you name (resolved to its work-tree root; never the bridge's own \
                folder). The result echoes checkout, HEAD, base and patch-id.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "checkout": { "type": "string", "description": "Absolute path inside the git checkout." },
                    "summary": { "type": "string", "minLength": 1 },
                    "issue": { "type": "string" },
                    "evidence": { "type": "string" },
                    "base": { "type": "string", "description": "A commit to diff from instead of the merge base with origin/main." }
                },
                "required": ["checkout", "summary"],
                "additionalProperties": false
            }
        },
        {
            "name": CANDIDATE,
            "description": "Read a review candidate: its record and the stored patch (author and the project's reviewer).",
            "inputSchema": {
                "type": "object",
                "properties": { "candidateId": { "type": "string" } },
                "required": ["candidateId"],
                "additionalProperties": false
            }
        },
        {
            "name": VERDICT,
            "description": "Record your verdict on a candidate you read: approve, or changes with at least one \
                concrete finding. Name the patchId you read; the author cannot decide.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "candidateId": { "type": "string" },
                    "patchId": { "type": "string" },
                    "verdict": { "type": "string", "enum": ["approve", "changes"] },
                    "findings": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "text": { "type": "string", "minLength": 1 },
                                "file": { "type": "string" },
                                "line": { "type": "integer", "minimum": 0 }
                            },
                            "required": ["text"],
                            "additionalProperties": false
                        }
                    },
                    "summary": { "type": "string" }
                },
                "required": ["candidateId", "patchId", "verdict"],
                "additionalProperties": false
            }
        }
    ]);
    serde_json::from_value(tools).unwrap_or_default()
}

/// The lead's wake tools, offered to a seat that holds a lead hire.
pub fn lead_definitions() -> Vec<Tool> {
    let tools = json!([
        {
            "name": GET_WAKE,
            "description": "Read the autonomy switch, your scheduled self-wakes, the next Auto round \
                and when your last round wake was accepted.",
            "inputSchema": { "type": "object", "properties": {}, "additionalProperties": false }
        },
        {
            "name": SCHEDULE_WAKE,
            "description": "Schedule a self-wake: a wake message to your own conversation at a time \
                (ms since the epoch, at most 30 days ahead). The autonomy switch stops it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "atMs": { "type": "integer", "minimum": 0 },
                    "note": { "type": "string", "maxLength": 2048 }
                },
                "required": ["atMs"],
                "additionalProperties": false
            }
        }
    ]);
    serde_json::from_value(tools).unwrap_or_default()
}

/// The `_meta` key carrying the catalog revision on `clankie_tools`, so a
/// bridge sees a changed definition whenever the revision changes.
pub const REVISION_META: &str = clankie_types::fleet::meta::CATALOG_REVISION;

/// The two tool definitions; `connected` names the accounts verified now.
pub fn tool_definitions(connected: &[String], revision: u64) -> Vec<Tool> {
    let now = if connected.is_empty() {
        "none".to_string()
    } else {
        connected.join(", ")
    };
    let tools = json!([
        {
            "name": TOOLS,
            "_meta": { (REVISION_META): revision.to_string() },
            "description": format!(
                "Search Clankie's connected MCP tools. {{query}} returns at most 20 qualified names \
                 (<account>_<tool>) with one-line descriptions; {{names}} returns at most 10 full \
                 input schemas. Discover a schema before calling it with clankie_call. \
                 Connected now: {now}."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "Words to search names and descriptions for; omit for the first page." },
                    "names": { "type": "array", "items": { "type": "string" }, "maxItems": 10, "description": "Qualified names whose full input schemas to return." }
                },
                "additionalProperties": false
            }
        },
        {
            "name": CALL,
            "description": "Call one connected tool by its qualified name with arguments matching its schema, \
                or reconcile an earlier call with {receiptId} alone (never dispatches). Results carry a \
                receiptId and an outcome: ok, error, or uncertain (the deadline passed after dispatch: the \
                call may have applied; reconcile by receiptId, never repeat it).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "Qualified tool name from clankie_tools." },
                    "arguments": { "type": "object", "description": "Arguments matching the tool's input schema." },
                    "receiptId": { "type": "string", "description": "Alone: read that receipt. With name: use this id for the new call's receipt." },
                    "background": { "type": "boolean", "description": "Marks a call made outside an interactive turn." }
                },
                "anyOf": [ { "required": ["name"] }, { "required": ["receiptId"] } ],
                "additionalProperties": false
            }
        }
    ]);
    serde_json::from_value(tools).unwrap_or_default()
}
