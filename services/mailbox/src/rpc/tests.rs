//! The in-process tier for the handlers' own rules: who a hire is
//! attributed to, when an autonomous turn may staff, where a project's
//! tracker calls go, the revision fence, and the transcript entry bounds.
//! The scenario tests (`tests/tests/mailbox.rs`, `auto.rs`, `tracker.rs`)
//! drive the same rules through the real binaries.

use std::collections::BTreeMap;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::auto::v1 as auto_pb;
use clankie_runtime::ErrorCode;

use super::conversations::{caller, check_entry};
use super::hires::attribute;
use super::projects::{project_at, staffing, tracker_route};
use super::seats::peers_off;
use crate::store::{ConversationRec, HEAD, ProjectRec, StateFile, TrackerBinding, WorkspaceRec};

fn project(id: &str, name: &str) -> ProjectRec {
    ProjectRec {
        project_id: id.into(),
        name: name.into(),
        workspaces: vec![WorkspaceRec {
            workspace_id: format!("ws-{id}"),
            path: format!("/work/{name}"),
            machine: String::new(),
            platform: String::new(),
            convention: TrackerBinding::Unbound,
        }],
        lead_conversation_id: String::new(),
        worker_cap: 4,
        standing_reviewer: false,
        revision: 1,
        created_at_ms: 0,
        tracker: TrackerBinding::Unbound,
        tracker_team: String::new(),
        linear_project_id: String::new(),
        auto: true,
        focus: String::new(),
        overrides: BTreeMap::new(),
    }
}

fn conversation(id: &str, kind: &str, projects: &[&str]) -> ConversationRec {
    ConversationRec {
        conversation_id: id.into(),
        kind: clankie_types::transcript::ConversationKind::parse(kind).expect("kind"),
        title: id.into(),
        created_at_ms: 0,
        removed: false,
        workspace: String::new(),
        projects: projects.iter().map(|p| p.to_string()).collect(),
    }
}

fn state(projects: Vec<ProjectRec>, conversations: Vec<ConversationRec>) -> StateFile {
    StateFile {
        version: 1,
        projects,
        conversations,
        hires: Vec::new(),
    }
}

fn full() -> auto_pb::Autonomy {
    auto_pb::Autonomy {
        on: true,
        level: clankie_types::autonomy::AutonomyLevel::Full.wire(),
        readable: true,
        ..Default::default()
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, clankie_runtime::ClankieError>) -> ErrorCode {
    r.expect_err("refused").code
}

#[test]
fn an_autonomous_turn_staffs_only_with_every_switch_allowing_it() {
    let p = project("p1", "alpha");
    assert!(staffing(&full(), &p).is_ok());
    let cases = [
        (
            auto_pb::Autonomy {
                readable: false,
                ..full()
            },
            "cannot be read",
        ),
        (
            auto_pb::Autonomy {
                on: false,
                ..full()
            },
            "switch is off",
        ),
        (auto_pb::Autonomy { level: 0, ..full() }, "is off, not full"),
    ];
    for (autonomy, why) in cases {
        let e = staffing(&autonomy, &p).expect_err("propose only");
        assert_eq!(e.code, ErrorCode::ProposeOnly);
        assert!(e.message.contains(why), "{}: {why}", e.message);
    }
    let mut manual = p.clone();
    manual.auto = false;
    assert!(staffing(&full(), &manual).is_err());
    let mut held = p;
    held.overrides.insert("outward".into(), false);
    let e = staffing(&full(), &held).expect_err("propose only");
    assert!(e.message.contains("outward"), "{}", e.message);
}

#[test]
fn tracker_calls_follow_the_binding_then_agreeing_conventions() {
    let mut p = project("p1", "alpha");
    assert!(
        tracker_route(&p).is_err(),
        "unbound, no agreeing workspaces"
    );
    p.workspaces[0].convention = TrackerBinding::Linear;
    p.linear_project_id = "uuid".into();
    assert_eq!(
        tracker_route(&p),
        Ok((
            clankie_types::TrackerRoute::Linear,
            String::new(),
            "uuid".into()
        ))
    );
    p.workspaces.push(WorkspaceRec {
        convention: TrackerBinding::Builtin,
        ..p.workspaces[0].clone()
    });
    assert!(tracker_route(&p).is_err(), "conventions disagree");
    p.tracker = TrackerBinding::Builtin;
    p.tracker_team = "ENG".into();
    assert_eq!(
        tracker_route(&p),
        Ok((
            clankie_types::TrackerRoute::Builtin,
            "ENG".into(),
            String::new()
        ))
    );
}

#[test]
fn an_edit_lands_only_at_the_revision_it_read() {
    let mut s = state(vec![project("p1", "alpha")], vec![]);
    assert!(project_at(&mut s, "alpha", 1).is_ok());
    assert!(project_at(&mut s, "p1", 1).is_ok());
    assert_eq!(
        code(project_at(&mut s, "alpha", 2).map(|_| ())),
        ErrorCode::StaleRevision
    );
    assert_eq!(
        code(project_at(&mut s, "beta", 1).map(|_| ())),
        ErrorCode::ProjectNotFound
    );
}

#[test]
fn a_configured_lead_hires_only_into_its_own_projects() {
    let mut alpha = project("p1", "alpha");
    alpha.tracker = TrackerBinding::Builtin;
    alpha.tracker_team = "ENG".into();
    let mut beta = project("p2", "beta");
    beta.lead_conversation_id = "lead-b".into();
    let s = state(
        vec![alpha, beta],
        vec![
            conversation(HEAD, "head", &[]),
            conversation("lead-a", "lead", &["ENG"]),
            conversation("lead-b", "lead", &[]),
        ],
    );
    // Its one project is the default; another lead's is refused.
    assert_eq!(attribute(&s, "lead-a", "").expect("own").name, "alpha");
    assert_eq!(attribute(&s, "lead-a", "alpha").expect("own").name, "alpha");
    assert_eq!(code(attribute(&s, "lead-a", "beta")), ErrorCode::NotOwner);
    assert_eq!(
        attribute(&s, "lead-b", "").expect("named lead").name,
        "beta"
    );
    // An unconfigured conversation names the project.
    assert_eq!(attribute(&s, HEAD, "beta").expect("named").name, "beta");
    assert_eq!(
        code(attribute(&s, HEAD, "gamma")),
        ErrorCode::ProjectNotFound
    );
}

#[test]
fn the_calling_conversation_is_the_head_unless_named_and_present() {
    let mut gone = conversation("old", "lead", &[]);
    gone.removed = true;
    let s = state(vec![], vec![conversation(HEAD, "head", &[]), gone]);
    assert_eq!(caller(&s, "").expect("head"), HEAD);
    assert_eq!(code(caller(&s, "old")), ErrorCode::ConversationNotFound);
    assert_eq!(code(caller(&s, "nope")), ErrorCode::ConversationNotFound);
}

#[test]
fn entries_carry_an_id_and_bounded_text() {
    assert!(check_entry("report", "r1", "done").is_ok());
    assert_eq!(
        code(check_entry("report", "", "done")),
        ErrorCode::InvalidArgument
    );
    let long_id = "x".repeat(129);
    assert_eq!(
        code(check_entry("report", &long_id, "done")),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(check_entry("report", "r1", "  ")),
        ErrorCode::InvalidArgument
    );
    let long = "x".repeat(crate::MAX_REPORT + 1);
    assert_eq!(
        code(check_entry("report", "r1", &long)),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn unreadable_settings_are_never_reported_as_the_owners_choice() {
    let off = admission_pb::FleetSettings::default();
    assert_eq!(peers_off(&off).code, ErrorCode::PeerMessagesOff);
    let unreadable = admission_pb::FleetSettings {
        unreadable: true,
        ..Default::default()
    };
    assert_eq!(peers_off(&unreadable).code, ErrorCode::SettingsUnreadable);
}
