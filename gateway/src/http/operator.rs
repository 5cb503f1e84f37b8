//! The owner's HTTP routes: `GET /v1/operator/projects`,
//! `POST /v1/operator/projects/remove-workspace` and
//! `GET /v1/tracker/request-budget`. The owner credential comes
//! as `Authorization: Bearer ...` and is passed to the mailbox, which checks
//! it; the gateway decides nothing.

use clankie_runtime::clients::{Answer as _, Call};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use serde::Deserialize;
use serde_json::json;

use super::refusal;
use crate::Shared;

fn owner_request<T>(
    headers: &http::HeaderMap,
    msg: T,
    shared: &Shared,
) -> Result<tonic::Request<T>, ClankieError> {
    let value = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.starts_with("Bearer "))
        .ok_or_else(|| {
            ErrorCode::OwnerCredentialRequired.err("this route needs the owner credential")
        })?;
    let mut req = Call::new(msg).timeout(shared.request_budget).request();
    req.metadata_mut().insert(
        "authorization",
        value
            .parse()
            .map_err(|_| ErrorCode::OwnerCredentialInvalid.err("malformed credential"))?,
    );
    Ok(req)
}

pub(crate) async fn list_projects(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: http::HeaderMap,
) -> Response {
    let autonomy = query.get("includeAutonomy").is_some_and(|v| v == "true");
    let req = match owner_request(&headers, mailbox_pb::ListProjectsRequest {}, &shared) {
        Ok(r) => r,
        Err(e) => return refusal(&e),
    };
    let projects = match shared.mailbox.clone().list_projects(req).await.answer() {
        Ok(r) => r.projects,
        Err(e) => return refusal(&e),
    };
    if !autonomy {
        // The plain view: what older strict clients parse.
        return axum::Json(json!({
            "projects": projects.iter().map(clankie_types::views::project).collect::<Vec<_>>()
        }))
        .into_response();
    }
    let req = match owner_request(
        &headers,
        clankie_proto::auto::v1::ProjectStatusRequest {},
        &shared,
    ) {
        Ok(r) => r,
        Err(e) => return refusal(&e),
    };
    let status = match shared.auto.clone().project_status(req).await.answer() {
        Ok(r) => r,
        Err(e) => return refusal(&e),
    };
    axum::Json(json!({
        "projectsAuto": true,
        "linearProjectBindings": true,
        "needsYouTotal": status.needs_you_total,
        "projects": projects.iter().map(|p| {
            let line = status.projects.iter().find(|l| l.project_id == p.project_id);
            clankie_types::views::project_autonomy(p, line)
        }).collect::<Vec<_>>(),
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RemoveWorkspace {
    project_id: String,
    workspace_id: String,
    expected_revision: u64,
}

pub(crate) async fn remove_workspace(
    State(shared): State<Arc<Shared>>,
    headers: http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let args: RemoveWorkspace = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            return refusal(&ErrorCode::InvalidArgument.err(format!(
                "expected {{projectId, workspaceId, expectedRevision}}: {e}"
            )));
        }
    };
    let msg = mailbox_pb::RemoveWorkspaceRequest {
        project_id: args.project_id,
        workspace_id: args.workspace_id,
        expected_revision: args.expected_revision,
    };
    let req = match owner_request(&headers, msg, &shared) {
        Ok(r) => r,
        Err(e) => return refusal(&e),
    };
    match shared.mailbox.clone().remove_workspace(req).await.answer() {
        Ok(r) => {
            axum::Json(json!({ "project": clankie_types::views::project(&r) })).into_response()
        }
        Err(e) => refusal(&e),
    }
}

fn window(w: Option<clankie_proto::mcphost::v1::BudgetWindow>) -> serde_json::Value {
    let w = w.unwrap_or_default();
    json!({
        "limit": w.limit,
        "windowMs": w.window_ms,
        "used": w.used,
        "retryAtMs": (w.retry_at_ms > 0).then_some(w.retry_at_ms),
    })
}

/// `GET /v1/tracker/request-budget`: the per-actor tracker budgets, their
/// counts and refusals in the current window.
pub(crate) async fn request_budget(
    State(shared): State<Arc<Shared>>,
    headers: http::HeaderMap,
) -> Response {
    let req = match owner_request(
        &headers,
        clankie_proto::mcphost::v1::TrackerBudgetsRequest {},
        &shared,
    ) {
        Ok(r) => r,
        Err(e) => return refusal(&e),
    };
    match shared.mcp.clone().tracker_budgets(req).await.answer() {
        Ok(r) => axum::Json(json!({
            "requestsPerHour": r.requests_per_hour,
            "writesPerMinute": r.writes_per_minute,
            "actors": r.actors.into_iter().map(|a| json!({
                "actor": a.actor,
                "role": clankie_types::Role::wire_word(a.role),
                "class": clankie_types::host::BudgetClass::wire_word(a.class),
                "requests": window(a.requests),
                "writes": window(a.writes),
                "refused": a.refused,
            })).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => refusal(&e),
    }
}
