//! `work_item_write` (seed 003, "Owner-authorized work-item gestures"): the
//! owner's narrow gestures on a work item, on the tracker recorded for a
//! workspace's project: assign work metadata, add or remove a role label,
//! append a blocker. Each is one tracker write under a request id that is
//! its receipt. The journal is the receipt store: a repeated id never
//! dispatches, and it returns the original result only when the owner, the
//! source item, the gesture, the saved tracker and the account scope are all
//! the ones the original was written for.

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::{ReceiptId, ReceiptKind};
use clankie_types::{Role, TrackerRoute};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{DEFAULT_BUDGET, McpHost, Requester, result_pb};

/// The longest blocker text.
const MAX_BLOCKER: usize = 32 * 1024;

/// One gesture, as the owner asked for it.
#[derive(Debug, Clone, PartialEq)]
enum Gesture {
    Assign {
        assignee: Option<String>,
        priority: Option<i64>,
    },
    AddRoleLabel(Role),
    RemoveRoleLabel(Role),
    Blocker(String),
}

/// The label that names a role on a work item.
pub fn role_label(role: Role) -> String {
    format!("role:{}", role.as_str())
}

impl Gesture {
    fn parse(req: &mcphost_pb::WorkItemWriteRequest) -> Result<Gesture, ClankieError> {
        use mcphost_pb::work_item_write_request::Gesture as G;
        let role = |wire: i32| {
            Role::from_wire(wire)
                .ok_or_else(|| ErrorCode::InvalidArgument.err("a role label names a role"))
        };
        match &req.gesture {
            None => Err(ErrorCode::InvalidArgument.err(
                "name one gesture: assign work metadata, add or remove a role label, or a blocker",
            )),
            Some(G::Assign(m)) if m.assignee.is_none() && m.priority.is_none() => {
                Err(ErrorCode::InvalidArgument.err("assign names an assignee or a priority"))
            }
            Some(G::Assign(m)) => Ok(Gesture::Assign {
                assignee: m.assignee.clone(),
                priority: m.priority,
            }),
            Some(G::AddRoleLabel(r)) => role(*r).map(Gesture::AddRoleLabel),
            Some(G::RemoveRoleLabel(r)) => role(*r).map(Gesture::RemoveRoleLabel),
            Some(G::Blocker(text)) if text.trim().is_empty() || text.len() > MAX_BLOCKER => {
                Err(ErrorCode::InvalidArgument.err("a blocker is 1 byte to 32 KiB of text"))
            }
            Some(G::Blocker(text)) => Ok(Gesture::Blocker(text.clone())),
        }
    }

    /// The gesture as the journal keys it.
    fn key(&self) -> Value {
        match self {
            Gesture::Assign { assignee, priority } => {
                json!({ "assign": { "assignee": assignee, "priority": priority } })
            }
            Gesture::AddRoleLabel(r) => json!({ "addRoleLabel": r.as_str() }),
            Gesture::RemoveRoleLabel(r) => json!({ "removeRoleLabel": r.as_str() }),
            Gesture::Blocker(text) => json!({ "blocker": text }),
        }
    }
}

/// The journal key: who, which item, what, and where it was written.
fn journal_key(
    owner: &str,
    item: &str,
    gesture: &Gesture,
    workspace: &str,
    tracker: &str,
) -> String {
    let key = json!({
        "owner": owner, "item": item, "gesture": gesture.key(),
        "workspace": workspace, "tracker": tracker,
    });
    hex::encode(Sha256::digest(key.to_string().as_bytes()))
}

/// A tracker answer's structured content.
fn structured(result: &mcphost_pb::CallResult) -> Value {
    serde_json::from_str::<Value>(&result.result_json)
        .ok()
        .and_then(|v| v.get("structuredContent").cloned())
        .unwrap_or(Value::Null)
}

impl McpHost {
    /// The saved tracker and account scope a workspace's project writes to
    /// now: the built-in team, or the Linear account's verified identity
    /// and the project's route.
    async fn tracker_scope(&self, workspace: &str) -> Result<String, ClankieError> {
        let caller = self.tracker_caller(&Requester::Owner, workspace).await?;
        if !caller.route_problem.is_empty() {
            return Err(ErrorCode::TrackerRouteUnavailable.err(format!(
                "the workspace's project has no usable tracker route: {}",
                caller.route_problem
            )));
        }
        match caller.route {
            Some(TrackerRoute::Builtin) => Ok(format!("builtin:{}", caller.route_team)),
            Some(TrackerRoute::Linear) => {
                let identity = self
                    .inner
                    .identities
                    .get(crate::tracker::ACCOUNT)
                    .map(|i| i.stable())
                    .ok_or_else(|| {
                        ErrorCode::TrackerRouteUnavailable.err(
                            "the Linear account has no verified identity: run `clankie access linear verify`",
                        )
                    })?;
                Ok(format!("linear:{identity}:{}", caller.route_project))
            }
            _ => Err(ErrorCode::TrackerRouteUnavailable
                .err("the workspace belongs to no project with a recorded tracker")),
        }
    }

    /// One owner gesture on a work item, journaled under its request id.
    pub(crate) async fn work_item_write(
        &self,
        req: mcphost_pb::WorkItemWriteRequest,
    ) -> Result<mcphost_pb::WorkItemWriteResponse, ClankieError> {
        let gesture = Gesture::parse(&req)?;
        if req.item.trim().is_empty() || req.workspace.trim().is_empty() {
            return Err(ErrorCode::InvalidArgument.err("name the workspace and the source item"));
        }
        let given = Some(req.request_id.as_str()).filter(|id| !id.is_empty());
        let request_id = ReceiptId::given_or_mint(given, ReceiptKind::Work)?.into_string();
        let who = Requester::Owner;
        let owner = crate::owner_of(&who, &Default::default());
        let tracker = self.tracker_scope(&req.workspace).await?;
        let journal = journal_key(&owner, &req.item, &gesture, &req.workspace, &tracker);
        // A repeated id is read, never dispatched again.
        if let Some(existing) = self.inner.receipts.get(&request_id) {
            if existing.owner != owner || existing.journal != journal {
                return Err(ErrorCode::ReceiptConflict.err(
                    "this request id was written for another owner, item, gesture, tracker or account scope; read it with `clankie work receipt` or choose a new id",
                ));
            }
            return Ok(mcphost_pb::WorkItemWriteResponse {
                request_id,
                result: Some(result_pb(&existing, true)),
            });
        }
        let (tool, args) = self.gesture_call(&gesture, &req, &request_id).await?;
        let call = mcphost_pb::CallToolRequest {
            name: format!("linear_{tool}"),
            arguments_json: args.to_string(),
            receipt_id: request_id.clone(),
            ..Default::default()
        };
        let result = self
            .call_journaled(
                &who,
                call,
                journal,
                DEFAULT_BUDGET,
                None,
                Default::default(),
            )
            .await?;
        Ok(mcphost_pb::WorkItemWriteResponse {
            request_id,
            result: Some(result),
        })
    }

    /// The one tracker write a gesture is. A role label reads the item's
    /// labels first and writes the changed set only if the item is still as
    /// read (`ifUpdatedAt`).
    async fn gesture_call(
        &self,
        gesture: &Gesture,
        req: &mcphost_pb::WorkItemWriteRequest,
        request_id: &str,
    ) -> Result<(&'static str, Value), ClankieError> {
        let (item, repo) = (req.item.as_str(), req.workspace.as_str());
        Ok(match gesture {
            Gesture::Assign { assignee, priority } => {
                let mut args = json!({ "id": item, "repo": repo, "idempotencyKey": request_id });
                if let Some(a) = assignee {
                    args["assignee"] = json!(a);
                }
                if let Some(p) = priority {
                    args["priority"] = json!(p);
                }
                ("save_issue", args)
            }
            Gesture::Blocker(text) => (
                "post_issue_event",
                json!({ "issueId": item, "stage": "blocked", "body": text, "repo": repo,
                        "idempotencyKey": request_id }),
            ),
            Gesture::AddRoleLabel(role) | Gesture::RemoveRoleLabel(role) => {
                let read = mcphost_pb::CallToolRequest {
                    name: "linear_get_issue".into(),
                    arguments_json: json!({ "id": item, "repo": repo }).to_string(),
                    ..Default::default()
                };
                let answer = self
                    .call_as(
                        &Requester::Owner,
                        read,
                        DEFAULT_BUDGET,
                        None,
                        Default::default(),
                    )
                    .await?;
                let issue = structured(&answer)
                    .get("issue")
                    .cloned()
                    .ok_or_else(|| {
                        ErrorCode::TrackerRouteUnavailable.err(format!(
                            "the item could not be read before its labels change; nothing was written: {}",
                            answer.result_json
                        ))
                    })?;
                let label = role_label(*role);
                let mut labels: Vec<String> = issue["labels"]
                    .as_array()
                    .map(|l| {
                        l.iter()
                            .filter_map(|v| v.as_str().or_else(|| v["name"].as_str()))
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                labels.retain(|l| *l != label);
                if matches!(gesture, Gesture::AddRoleLabel(_)) {
                    labels.push(label);
                }
                let mut args = json!({ "id": item, "labels": labels, "repo": repo,
                                       "idempotencyKey": request_id });
                if let Some(at) = issue["updatedAt"].as_i64() {
                    args["ifUpdatedAt"] = json!(at);
                }
                ("save_issue", args)
            }
        })
    }

    /// A work-item write's recorded result, for the owner; never dispatches.
    pub(crate) async fn work_item_receipt(
        &self,
        request_id: &str,
    ) -> Result<mcphost_pb::WorkItemWriteResponse, ClankieError> {
        let owner = crate::owner_of(&Requester::Owner, &Default::default());
        match self.inner.receipts.get(request_id) {
            Some(r) if r.owner == owner && !r.journal.is_empty() => {
                Ok(mcphost_pb::WorkItemWriteResponse {
                    request_id: request_id.to_string(),
                    result: Some(result_pb(&r, true)),
                })
            }
            _ => {
                self.inner.receipts.health()?;
                Err(ErrorCode::ReceiptNotFound.err("no work-item write with this request id"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_key_changes_with_each_thing_it_checks() {
        let g = Gesture::Blocker("waiting on the API".into());
        let base = journal_key("owner", "ENG-1", &g, "/w", "builtin:ENG");
        assert_eq!(base, journal_key("owner", "ENG-1", &g, "/w", "builtin:ENG"));
        for other in [
            journal_key("grant:g", "ENG-1", &g, "/w", "builtin:ENG"),
            journal_key("owner", "ENG-2", &g, "/w", "builtin:ENG"),
            journal_key(
                "owner",
                "ENG-1",
                &Gesture::AddRoleLabel(Role::Worker),
                "/w",
                "builtin:ENG",
            ),
            journal_key("owner", "ENG-1", &g, "/w", "builtin:OPS"),
            journal_key("owner", "ENG-1", &g, "/w", "linear:user:u/workspace:w:p"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn a_gesture_is_exactly_one_of_the_four() {
        use mcphost_pb::work_item_write_request::Gesture as G;
        let req = |g: Option<G>| mcphost_pb::WorkItemWriteRequest {
            gesture: g,
            ..Default::default()
        };
        assert!(Gesture::parse(&req(None)).is_err());
        assert!(Gesture::parse(&req(Some(G::Assign(Default::default())))).is_err());
        assert!(Gesture::parse(&req(Some(G::Blocker(" ".into())))).is_err());
        assert!(Gesture::parse(&req(Some(G::AddRoleLabel(0)))).is_err());
        assert_eq!(
            Gesture::parse(&req(Some(G::RemoveRoleLabel(Role::Reviewer.wire())))).ok(),
            Some(Gesture::RemoveRoleLabel(Role::Reviewer))
        );
        assert_eq!(role_label(Role::Reviewer), "role:reviewer");
    }
}
