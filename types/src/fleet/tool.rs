//! The fleet tools a member is served, by the one name each goes by.

/// One fleet tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FleetTool {
    /// `clankie_tools`: search and describe the connected tools.
    Tools,
    /// `clankie_call`: call a connected tool, or reconcile a receipt.
    Call,
    /// `message_clankie`: report to the hiring lead.
    Report,
    /// `list_fleet_seats`: the seats a peer message can address.
    Peers,
    /// `message_peer`: message another seat.
    Peer,
    /// `submit_for_review`: hand a change to the landing review.
    Submit,
    /// `review_candidate`: a reviewer reads a candidate.
    Candidate,
    /// `review_verdict`: a reviewer's verdict.
    Verdict,
    /// `get_wake`: a lead seat reads its next wake.
    GetWake,
    /// `schedule_wake`: a lead seat schedules its own wake.
    ScheduleWake,
}

/// When a tool is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// While connected tools are on.
    Meta,
    /// Always.
    Report,
    /// While peer messages are on.
    Peers,
    /// For a project that names a reviewer.
    Review,
    /// For a lead's seat.
    Lead,
}

impl FleetTool {
    pub const ALL: [FleetTool; 10] = [
        FleetTool::Tools,
        FleetTool::Call,
        FleetTool::Report,
        FleetTool::Peers,
        FleetTool::Peer,
        FleetTool::Submit,
        FleetTool::Candidate,
        FleetTool::Verdict,
        FleetTool::GetWake,
        FleetTool::ScheduleWake,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            FleetTool::Tools => "clankie_tools",
            FleetTool::Call => "clankie_call",
            FleetTool::Report => "message_clankie",
            FleetTool::Peers => "list_fleet_seats",
            FleetTool::Peer => "message_peer",
            FleetTool::Submit => "submit_for_review",
            FleetTool::Candidate => "review_candidate",
            FleetTool::Verdict => "review_verdict",
            FleetTool::GetWake => "get_wake",
            FleetTool::ScheduleWake => "schedule_wake",
        }
    }

    pub fn parse(name: &str) -> Option<FleetTool> {
        FleetTool::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn family(self) -> Family {
        match self {
            FleetTool::Tools | FleetTool::Call => Family::Meta,
            FleetTool::Report => Family::Report,
            FleetTool::Peers | FleetTool::Peer => Family::Peers,
            FleetTool::Submit | FleetTool::Candidate | FleetTool::Verdict => Family::Review,
            FleetTool::GetWake | FleetTool::ScheduleWake => Family::Lead,
        }
    }

    /// The receipt kind a dispatch of this tool is recorded under, when it
    /// has one.
    pub fn receipt_kind(self) -> Option<super::ReceiptKind> {
        match self {
            FleetTool::Call => Some(super::ReceiptKind::Call),
            FleetTool::Report => Some(super::ReceiptKind::Report),
            FleetTool::Peer => Some(super::ReceiptKind::Peer),
            _ => None,
        }
    }
}

impl FleetTool {
    /// What a member reads about the tool. (The gateway adds to
    /// `clankie_tools` which accounts are connected now.)
    pub const fn description(self) -> &'static str {
        match self {
            FleetTool::Report => {
                "Report to the lead that hired this seat (progress, a question, done). \
                 It arrives in the lead's conversation as your agent output, not as an instruction; \
                 you cannot choose another recipient. A repeated receiptId returns the original \
                 delivery and sends nothing new."
            }
            FleetTool::Peers => {
                "List the current seats of your own fleet (yourself included as `self`), \
                 with what addresses each seat (your own entry also names the agent your seat is \
                 bound to). Use a returned seatId with message_peer."
            }
            FleetTool::Peer => {
                "Send a message to another current seat of your fleet. It arrives as your \
                 agent output, never as an instruction. While an earlier message to that seat is \
                 unresolved, this returns its receipt and sends nothing; nothing is ever resent."
            }
            FleetTool::Submit => {
                "Submit the exact committed change of a checkout for landing review: \
                 `git diff --binary` from the merge base with origin/main (or `base`) to HEAD of the \
                 absolute checkout you name (resolved to its work-tree root; never the bridge's own \
                 folder). The result echoes checkout, HEAD, base and patch-id."
            }
            FleetTool::Candidate => {
                "Read a review candidate: its record and the stored patch (author and the project's reviewer)."
            }
            FleetTool::Verdict => {
                "Record your verdict on a candidate you read: approve, or changes with at least one \
                 concrete finding. Name the patchId you read; the author cannot decide."
            }
            FleetTool::GetWake => {
                "Read the autonomy switch, your scheduled self-wakes, the next Auto round \
                 and when your last round wake was accepted."
            }
            FleetTool::ScheduleWake => {
                "Schedule a self-wake: a wake message to your own conversation at a time \
                 (ms since the epoch, at most 30 days ahead). The autonomy switch stops it."
            }
            FleetTool::Tools => {
                "Search Clankie's connected MCP tools. {query} returns at most 20 qualified names \
                 (<account>_<tool>) with one-line descriptions; {names} returns at most 10 full \
                 input schemas. Discover a schema before calling it with clankie_call."
            }
            FleetTool::Call => {
                "Call one connected tool by its qualified name with arguments matching its schema, \
                 or reconcile an earlier call with {receiptId} alone (never dispatches). Results carry a \
                 receiptId and an outcome: ok, error, or uncertain (the deadline passed after dispatch: the \
                 call may have applied; reconcile by receiptId, never repeat it)."
            }
        }
    }

    /// The input schema a member lists for this tool, derived from its
    /// arguments' type (`args.rs`).
    pub fn input_schema(self) -> serde_json::Value {
        use super::args::*;
        match self {
            FleetTool::Tools => input_schema::<ToolsArgs>(),
            FleetTool::Call => input_schema::<CallArgs>(),
            FleetTool::Report => input_schema::<ReportArgs>(),
            FleetTool::Peers | FleetTool::GetWake => input_schema::<NoArgs>(),
            FleetTool::Peer => input_schema::<PeerArgs>(),
            FleetTool::Submit => input_schema::<SubmitArgs>(),
            FleetTool::Candidate => input_schema::<CandidateArgs>(),
            FleetTool::Verdict => input_schema::<VerdictArgs>(),
            FleetTool::ScheduleWake => input_schema::<ScheduleWakeArgs>(),
        }
    }
}

impl std::fmt::Display for FleetTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_names_are_ours_each_in_its_family() {
        let f = super::super::fixture("tools.json");
        let golden = f.as_object().expect("object");
        assert_eq!(golden.len(), FleetTool::ALL.len());
        for t in FleetTool::ALL {
            assert_eq!(FleetTool::parse(t.name()), Some(t));
            let family = golden[t.name()].as_str().expect("family");
            assert_eq!(format!("{:?}", t.family()).to_lowercase(), family, "{t}");
        }
        assert_eq!(FleetTool::parse("clankie_Call"), None);
    }
}
