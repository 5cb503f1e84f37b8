//! The tool definitions a member lists: the meta tools (`clankie_tools`,
//! `clankie_call`) while connected tools are on, and for a native seat the
//! report, peer, review and (for a lead) wake tools. Names, descriptions
//! and input schemas all come from the fleet contract (`types::fleet`);
//! only the connected accounts and the catalog revision are the gateway's.

use clankie_types::fleet::{Family, FleetTool};
use rmcp::model::Tool;
use serde_json::{Value, json};

/// The `_meta` key carrying the catalog revision on `clankie_tools`, so a
/// bridge sees a changed definition whenever the revision changes.
pub const REVISION_META: &str = clankie_types::fleet::meta::CATALOG_REVISION;

/// One tool as the contract defines it.
fn definition(tool: FleetTool, description: String, meta: Option<Value>) -> Tool {
    let mut def = json!({
        "name": tool.name(),
        "description": description,
        "inputSchema": tool.input_schema(),
    });
    if let Some(meta) = meta {
        def["_meta"] = meta;
    }
    serde_json::from_value(def).unwrap_or_else(|_| Tool::default())
}

/// Every tool of `family`, as the contract defines it.
fn family(family: Family) -> Vec<Tool> {
    FleetTool::ALL
        .into_iter()
        .filter(|t| t.family() == family)
        .map(|t| definition(t, t.description().into(), None))
        .collect()
}

/// `message_clankie`, offered to seats in panes (never to bearer links).
pub fn report_definition() -> Tool {
    definition(
        FleetTool::Report,
        FleetTool::Report.description().into(),
        None,
    )
}

/// `list_fleet_seats` and `message_peer`, offered to seats while
/// fleet.peerMessages is on.
pub fn peer_definitions() -> Vec<Tool> {
    family(Family::Peers)
}

/// The landing review tools, offered to seats whose project names a
/// standing reviewer. `submit_for_review` is carried out by the bridge,
/// which reads the change from the checkout it names.
pub fn review_definitions() -> Vec<Tool> {
    family(Family::Review)
}

/// The lead's wake tools, offered to a seat that holds a lead hire.
pub fn lead_definitions() -> Vec<Tool> {
    family(Family::Lead)
}

/// The two meta tools; `connected` names the accounts verified now.
pub fn tool_definitions(connected: &[String], revision: u64) -> Vec<Tool> {
    let now = if connected.is_empty() {
        "none".to_string()
    } else {
        connected.join(", ")
    };
    vec![
        definition(
            FleetTool::Tools,
            format!("{} Connected now: {now}.", FleetTool::Tools.description()),
            Some(json!({ REVISION_META: revision.to_string() })),
        ),
        definition(FleetTool::Call, FleetTool::Call.description().into(), None),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_lists_its_contract_tools_with_their_schemas() {
        let names = |tools: Vec<Tool>| -> Vec<String> {
            tools.iter().map(|t| t.name.to_string()).collect()
        };
        assert_eq!(
            names(tool_definitions(&[], 3)),
            ["clankie_tools", "clankie_call"]
        );
        assert_eq!(
            names(peer_definitions()),
            ["list_fleet_seats", "message_peer"]
        );
        assert_eq!(
            names(review_definitions()),
            ["submit_for_review", "review_candidate", "review_verdict"]
        );
        assert_eq!(names(lead_definitions()), ["get_wake", "schedule_wake"]);
        let tools = serde_json::to_value(tool_definitions(&["time".into()], 7)).expect("json");
        assert_eq!(tools[0]["_meta"][REVISION_META], "7");
        assert!(
            tools[0]["description"]
                .as_str()
                .expect("text")
                .ends_with("Connected now: time.")
        );
        assert_eq!(
            tools[1]["inputSchema"],
            FleetTool::Call.input_schema(),
            "the listed schema is the derived one"
        );
    }
}
