//! The JSON views of shared records, one spelling for every edge that
//! prints or serves them (the gateway's HTTP routes and the CLI).

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use serde_json::{Value, json};

use crate::hire::{HireEnd, HireReadiness};
use crate::host::TransportKind;

/// The word for an account's state (`verified`, `verifying`,
/// `unavailable`).
pub fn account_state_word(state: i32) -> &'static str {
    match mcphost_pb::AccountState::try_from(state) {
        Ok(mcphost_pb::AccountState::Verified) => "verified",
        Ok(mcphost_pb::AccountState::Verifying) => "verifying",
        Ok(mcphost_pb::AccountState::Unavailable) => "unavailable",
        _ => "unknown",
    }
}

/// The provider identity an account's verification recorded.
pub fn account_identity(i: &mcphost_pb::AccountIdentity) -> Value {
    json!({
        "userId": i.user_id,
        "workspaceId": i.workspace_id,
        "email": (!i.email.is_empty()).then_some(&i.email),
        "workspaceName": (!i.workspace_name.is_empty()).then_some(&i.workspace_name),
        "verifiedAtMs": i.verified_at_ms,
    })
}

/// A connected account as `clankie accounts` and the console show it.
pub fn account(a: &mcphost_pb::Account) -> Value {
    json!({
        "name": a.name,
        "transport": TransportKind::wire_word(a.transport),
        "target": a.target,
        "state": account_state_word(a.state),
        "identity": { "name": a.identity_name, "version": a.identity_version },
        "providerIdentity": a.provider_identity.as_ref().map(account_identity),
        "protocolVersion": a.protocol_version,
        "tools": a.tool_count,
        "lastError": a.last_error,
        "generation": a.generation,
        "restarts": a.restarts,
    })
}

/// A hire as `clankie roster` and the console show it.
pub fn hire(h: &mailbox_pb::HireRecord) -> Value {
    json!({
        "hireId": h.hire_id,
        "conversationId": h.conversation_id,
        "lead": if h.owner_present { h.conversation_id.as_str() } else { "unowned" },
        "handStarted": h.hand_started,
        "sandboxed": h.sandboxed,
        "harness": h.harness,
        "occupantPid": h.occupant_pid,
        "readiness": HireReadiness::wire_word(h.readiness),
        "readinessReason": h.readiness_reason,
        "projectId": h.project_id,
        "role": crate::Role::wire_word(h.role),
        "linkId": h.link_id,
        "fleet": h.fleet,
        "paneId": h.pane_id,
        "workspace": h.workspace,
        "command": h.command,
        "ended": HireEnd::wire_word(h.ended),
        // Transport presence apart from freshness: older-than-runtime is a
        // reload hint, never proof of an old build.
        "bridge": {
            "present": h.bridge_present,
            "freshness": crate::diagnostics::BridgeFreshness::wire_word(h.bridge_freshness),
        },
    })
}

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

/// A project's status line as `clankie project status` and the console
/// show it.
pub fn project_status_line(p: &clankie_proto::auto::v1::ProjectStatusLine) -> Value {
    json!({
        "projectId": p.project_id,
        "name": p.name,
        "auto": p.auto,
        "focus": p.focus,
        "agentsWorking": p.agents_working,
        "landedToday": p.landed_today,
        "needsYou": p.needs_you,
        "leadConversationId": p.lead_conversation_id,
    })
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
