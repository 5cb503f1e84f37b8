//! The JSON views of shared records, one spelling for every edge that
//! prints or serves them (the gateway's HTTP routes and the CLI).

use clankie_proto::mailbox::v1 as mailbox_pb;
use serde_json::{Value, json};

/// A project as `GET /v1/operator/projects` and `clankie project` show it.
pub fn project(p: &mailbox_pb::Project) -> Value {
    json!({
        "projectId": p.project_id,
        "name": p.name,
        "revision": p.revision,
        "leadConversationId": p.lead_conversation_id,
        "workerCap": p.worker_cap,
        "standingReviewer": p.standing_reviewer,
        "workspaces": p.workspaces.iter().map(|w| json!({
            "workspaceId": w.workspace_id,
            "path": w.path,
            "machine": w.machine,
            "platform": w.platform,
        })).collect::<Vec<_>>(),
    })
}

/// A project with its tracker binding and workspace conventions, as the
/// owner's `clankie project set` shows it (the plain view leaves them out).
pub fn project_settings(p: &mailbox_pb::Project) -> Value {
    let mut v = project(p);
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "tracker".into(),
            json!(crate::TrackerBinding::wire_word(p.tracker)),
        );
        obj.insert("trackerTeam".into(), json!(p.tracker_team));
        obj.insert("linearProjectId".into(), json!(p.linear_project_id));
        obj.insert("auto".into(), json!(p.auto));
        obj.insert("focus".into(), json!(p.focus));
        obj.insert("overrides".into(), json!(p.overrides));
        obj.insert(
            "conventions".into(),
            p.workspaces
                .iter()
                .map(|w| {
                    (
                        w.path.clone(),
                        json!(crate::TrackerBinding::wire_word(w.convention)),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into(),
        );
    }
    v
}

/// A project in the autonomy-aware view (`?includeAutonomy=true`): the
/// plain view plus Auto, focus, the built-in tracker project, the separate
/// Linear binding and the status line.
pub fn project_autonomy(
    p: &mailbox_pb::Project,
    status: Option<&clankie_proto::auto::v1::ProjectStatusLine>,
) -> Value {
    let mut v = project(p);
    if let Some(obj) = v.as_object_mut() {
        obj.insert("auto".into(), json!(p.auto));
        obj.insert("focus".into(), json!(p.focus));
        obj.insert(
            "trackerProjectId".into(),
            json!(
                (p.tracker == crate::TrackerBinding::Builtin.wire() && !p.tracker_team.is_empty())
                    .then_some(&p.tracker_team)
            ),
        );
        obj.insert(
            "linearProjectBinding".into(),
            if p.linear_project_id.is_empty() {
                Value::Null
            } else {
                json!({ "provider": "linear", "projectId": p.linear_project_id })
            },
        );
        obj.insert("overrides".into(), json!(p.overrides));
        if let Some(s) = status {
            obj.insert(
                "status".into(),
                json!({
                    "agentsWorking": s.agents_working,
                    "landedToday": s.landed_today,
                    "needsYou": s.needs_you,
                    "leadConversationId": s.lead_conversation_id,
                }),
            );
        }
    }
    v
}

/// A landing review candidate; the patch text only when asked for.
pub fn candidate(c: &mailbox_pb::ReviewCandidate, with_patch: bool) -> Value {
    let mut v = json!({
        "candidateId": c.candidate_id,
        "projectId": c.project_id,
        "authorSeat": c.author_seat,
        "authorHire": c.author_hire,
        "reviewerSeat": c.reviewer_seat,
        "checkout": c.checkout,
        "head": c.head,
        "base": c.base,
        "patchId": c.patch_id,
        "patchSha256": c.patch_sha256,
        "summary": c.summary,
        "issue": c.issue,
        "state": crate::landing::ReviewState::wire_word(c.state),
        "previous": c.previous,
        "findings": c.findings.iter().map(|f| json!({
            "text": f.text, "file": f.file, "line": f.line,
        })).collect::<Vec<_>>(),
        "verdictSummary": c.verdict_summary,
        "createdAtMs": c.created_at_ms,
        "decidedAtMs": c.decided_at_ms,
    });
    if !c.evidence.is_empty() {
        v["evidence"] = json!(c.evidence);
    }
    if with_patch {
        v["patch"] = json!(String::from_utf8_lossy(&c.patch));
    }
    v
}
