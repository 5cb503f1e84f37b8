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
