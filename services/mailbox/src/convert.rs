//! Records to their protobuf messages: one function per record kind.

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_types::hire::{HireEnd, HireReadiness};

use crate::store::{ConversationRec, EntryRec, HireRec, ProjectRec};
use crate::{reviews, seats};

pub(crate) fn project_pb(p: &ProjectRec) -> mailbox_pb::Project {
    mailbox_pb::Project {
        project_id: p.project_id.clone(),
        name: p.name.clone(),
        workspaces: p
            .workspaces
            .iter()
            .map(|w| mailbox_pb::Workspace {
                workspace_id: w.workspace_id.clone(),
                path: w.path.clone(),
                machine: w.machine.clone(),
                platform: w.platform.clone(),
                convention: w.convention.wire(),
            })
            .collect(),
        lead_conversation_id: p.lead_conversation_id.clone(),
        worker_cap: p.worker_cap,
        standing_reviewer: p.standing_reviewer,
        revision: p.revision,
        created_at_ms: p.created_at_ms,
        tracker: p.tracker.wire(),
        tracker_team: p.tracker_team.clone(),
        linear_project_id: p.linear_project_id.clone(),
        auto: p.auto,
        focus: p.focus.clone(),
        overrides: p.overrides.clone().into_iter().collect(),
    }
}
pub(crate) fn conversation_pb(c: &ConversationRec) -> mailbox_pb::Conversation {
    mailbox_pb::Conversation {
        conversation_id: c.conversation_id.clone(),
        kind: c.kind.wire(),
        title: c.title.clone(),
        created_at_ms: c.created_at_ms,
        removed: c.removed,
        workspace: c.workspace.clone(),
        projects: c.projects.clone(),
    }
}
pub(crate) fn entry_pb(e: EntryRec) -> mailbox_pb::Entry {
    mailbox_pb::Entry {
        seq: e.seq,
        kind: e.kind.wire(),
        role: e.role.wire(),
        text: e.text,
        source: e.source,
        untrusted: e.untrusted,
        at_ms: e.at_ms,
        receipt_id: e.receipt_id,
    }
}
pub(crate) fn hire_pb(h: &HireRec, owner_present: bool) -> mailbox_pb::HireRecord {
    mailbox_pb::HireRecord {
        hire_id: h.hire_id.clone(),
        conversation_id: h.conversation_id.clone(),
        project_id: h.project_id.clone(),
        role: h.role.wire(),
        link_id: h.link_id.clone(),
        fleet: h.fleet.clone(),
        pane_id: h.pane_id.clone(),
        workspace: h.workspace.clone(),
        command: h.command.clone(),
        created_at_ms: h.created_at_ms,
        ended: HireEnd::wire_or_unspecified(h.ended),
        owner_present,
        occupant_pid: h.occupant_pid,
        occupant_pidfs_id: h.occupant_pidfs_id,
        occupant_start_time: h.occupant_start_time,
        sandboxed: h.sandboxed,
        harness: h.harness.clone(),
        readiness: if h.ready_at_ms != 0 {
            HireReadiness::Ready
        } else if h.not_ready.is_empty() {
            HireReadiness::Pending
        } else {
            HireReadiness::Failed
        }
        .wire(),
        readiness_reason: h.not_ready.clone(),
        hand_started: h.hand_started,
        // The roster fills these from the seat's bridge observations.
        bridge_present: false,
        bridge_freshness: clankie_types::diagnostics::BridgeFreshness::Unknown.wire(),
    }
}
pub(crate) fn receipt_pb(m: &seats::PeerMessageRec, original: bool) -> mailbox_pb::PeerReceipt {
    mailbox_pb::PeerReceipt {
        peer_message_id: m.id.clone(),
        receipt_id: m.receipt_id.clone(),
        sender_seat: m.sender_seat.clone(),
        recipient_seat: m.recipient_seat.clone(),
        state: m.state.wire(),
        outcome: m.state.outcome().wire(),
        text: m.text.clone().unwrap_or_default(),
        created_at_ms: m.created_at_ms,
        settled_at_ms: m.settled_at_ms,
        follows: m.follows.clone(),
        original,
    }
}
pub(crate) fn delivery_pb(d: seats::DeliveryRec) -> mailbox_pb::Delivery {
    mailbox_pb::Delivery {
        delivery_id: d.delivery_id,
        kind: d.kind.wire(),
        from: d.from,
        text: d.text,
        created_at_ms: d.created_at_ms,
        peer_message_id: d.peer_message_id,
        follows: d.follows,
    }
}
pub(crate) fn candidate_pb(
    c: &reviews::CandidateRec,
    patch: Vec<u8>,
) -> mailbox_pb::ReviewCandidate {
    mailbox_pb::ReviewCandidate {
        candidate_id: c.candidate_id.clone(),
        project_id: c.project_id.clone(),
        author_seat: c.author_seat.clone(),
        author_hire: c.author_hire.clone(),
        reviewer_seat: c.reviewer_seat.clone(),
        checkout: c.checkout.clone(),
        head: c.head.clone(),
        base: c.base.clone(),
        patch_id: c.patch_id.clone(),
        patch_sha256: c.patch_sha256.clone(),
        summary: c.summary.clone(),
        issue: c.issue.clone(),
        evidence: c.evidence.clone(),
        state: c.state.wire(),
        findings: c
            .findings
            .iter()
            .map(|f| mailbox_pb::Finding {
                text: f.text.clone(),
                file: f.file.clone(),
                line: f.line,
            })
            .collect(),
        verdict_summary: c.verdict_summary.clone(),
        previous: c.previous.clone(),
        created_at_ms: c.created_at_ms,
        decided_at_ms: c.decided_at_ms,
        patch,
    }
}
