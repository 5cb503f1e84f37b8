//! The tracker's gRPC service.
//!
//! One SQLite connection behind a mutex, used from blocking threads: SQLite
//! has one writer anyway, and WAL lets the file be read while it writes.
//! Every RPC needs the owner credential; the mcp-host holds it and is the
//! only caller of `Invoke`, after it resolved the caller's role, profile and
//! budget. The store checks the role's owner/lead rules again.
//!
//! `list_changes` with `waitMs` is a long poll: when nothing is newer than the
//! cursor it waits (at most 20 s, never past the caller's deadline) for the
//! next commit, then reads again.

use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::owner::OwnerCheck;
use clankie_runtime::{ClankieError, ErrorCode, grpc};
use serde_json::Value;
use tokio::sync::watch;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use crate::store::{LeaseSlot, Store, StoreError};
use crate::tools::{self, Caller};
use crate::vocabulary::Role;
use clankie_runtime::refuse::tracker as refuse;

/// The longest `list_changes` wait.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

struct Inner {
    owner: OwnerCheck,
    /// `Err` when the database could not be opened: every call refuses.
    store: Result<Mutex<Store>, String>,
    cursor: watch::Sender<i64>,
    /// Store calls waiting for the next group commit.
    commits: crate::commits::Commits,
}

/// The tracker service; cheap to clone.
#[derive(Clone)]
pub struct TrackerService {
    inner: Arc<Inner>,
}

/// Maps a store error to its refusal.
pub fn store_refusal(e: StoreError) -> ClankieError {
    match e {
        StoreError::NotFound(m) => ErrorCode::TrackerNotFound.err(m),
        StoreError::Conflict(m) => ErrorCode::TrackerConflict.err(m),
        StoreError::Invalid(m) => ErrorCode::ArgumentsInvalid.err(m),
        StoreError::NotAllowed { role, what } => ErrorCode::RoleNotAllowed
            .err(what)
            .with_details(serde_json::json!({ "role": role.as_str() })),
        StoreError::Json(e) => ErrorCode::ArgumentsInvalid.err(e.to_string()),
        e @ StoreError::TooNew(_) => ErrorCode::ServiceUnavailable.err(e.to_string()),
        StoreError::Sqlite(e) => {
            tracing::error!(error = %e, "tracker.store_failed");
            ErrorCode::ServiceUnavailable.err("the tracker database failed this write; retry")
        }
        StoreError::Uncommitted(e) => {
            tracing::error!(error = %e, "tracker.commit_failed");
            ErrorCode::ServiceUnavailable.err(
                "the tracker database did not commit this write, so nothing of it applied; retry",
            )
        }
    }
}

/// A scoped write stays in its team: a named team must be it, and a named
/// issue must be one of its issues.
fn check_scope(store: &Store, scope: &str, tool: &str, args: &Value) -> Result<(), ClankieError> {
    if scope.is_empty() || !crate::vocabulary::is_write(tool) {
        return Ok(());
    }
    let team = store.team(scope).map_err(store_refusal)?;
    let outside = |what: &str| {
        ErrorCode::TrackerOutOfScope.err(format!(
            "{what} is outside this hire's project: its writes stay in team {}; pass repo to name another project's tracker",
            team.key
        ))
    };
    for key in ["team", "teamId"] {
        if let Some(named) = args.get(key).and_then(Value::as_str)
            && named != team.key
            && named != team.id
        {
            return Err(outside(&format!("team {named}")));
        }
    }
    let issue_keys: &[&str] = if tool == "save_issue" || tool == "save_issue_status" {
        &["id", "issueId", "parentId"]
    } else {
        &["issueId"]
    };
    for key in issue_keys {
        if let Some(named) = args.get(*key).and_then(Value::as_str) {
            // An unknown issue is the store's own not-found.
            if let Ok(issue) = store.issue(named)
                && issue.team_id != team.id
            {
                return Err(outside(&issue.identifier));
            }
        }
    }
    Ok(())
}

/// How to build the tracker service.
pub struct Options {
    pub paths: clankie_runtime::paths::StatePaths,
}

impl Options {
    pub fn new(paths: clankie_runtime::paths::StatePaths) -> Self {
        Options { paths }
    }

    /// Loads the owner credential and opens the store under
    /// `$CLANKIE_STATE/tracker` (see [`TrackerService::open`]).
    pub async fn build(
        self,
        _shutdown: tokio_util::sync::CancellationToken,
    ) -> anyhow::Result<TrackerService> {
        let owner = OwnerCheck::load(&self.paths.owner_credential())?;
        Ok(TrackerService::open(
            &self
                .paths
                .service_dir(clankie_runtime::Service::Tracker.name()),
            owner,
        ))
    }
}

impl TrackerService {
    /// Opens `dir/tracker.db`. An unreadable or newer database does not stop
    /// the service: it answers every call with `service_unavailable` and the
    /// reason, and writes nothing.
    pub fn open(dir: &Path, owner: OwnerCheck) -> Self {
        let store = Store::open(dir).map_err(|e| e.to_string());
        let cursor = match &store {
            Ok(s) => s.cursor().unwrap_or(0),
            Err(problem) => {
                tracing::error!(%problem, "tracker.store_unreadable");
                0
            }
        };
        TrackerService {
            inner: Arc::new(Inner {
                owner,
                store: store.map(Mutex::new),
                cursor: watch::channel(cursor).0,
                commits: Default::default(),
            }),
        }
    }

    /// Ready while the database opened as this folder's.
    pub fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        let problem = self.inner.store.as_ref().err().cloned();
        clankie_runtime::readiness::Readiness::check(move || problem.clone())
    }

    /// The tonic routes for this service.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(
            tracker_pb::tracker_server::TrackerServer::new(self.clone())
                .max_decoding_message_size(8 << 20)
                .max_encoding_message_size(16 << 20),
        )
    }

    /// Runs `f` on the store in the next group commit
    /// ([`crate::commits`]), and answers once that committed, with the
    /// cursor after it (published to the long polls first).
    pub(crate) async fn with_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, ClankieError> + Send + 'static,
    ) -> Result<(T, i64), ClankieError> {
        if let Err(problem) = &self.inner.store {
            return Err(ErrorCode::StateUnreadable
                .err(format!("the tracker database cannot be used: {problem}")));
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: crate::commits::Job = Box::new(move |store: &mut Store| {
            let out = f(store);
            Box::new(move |committed: Result<i64, ClankieError>| {
                let _ = tx.send(out.and_then(|v| committed.map(|cursor| (v, cursor))));
            })
        });
        if self.inner.commits.push(job) {
            let inner = self.inner.clone();
            tokio::task::spawn_blocking(move || {
                let Ok(store) = &inner.store else { return };
                let cursor = &inner.cursor;
                inner.commits.drain(
                    store,
                    |s| {
                        let c = s.cursor().map_err(store_refusal)?;
                        cursor.send_if_modified(|seen| std::mem::replace(seen, c) != c);
                        Ok(c)
                    },
                    store_refusal,
                );
            });
        }
        rx.await
            .map_err(|_| ErrorCode::Internal.err("the tracker task failed"))?
    }

    /// Runs one vocabulary tool; waits for a commit on an empty long poll.
    pub async fn invoke(
        &self,
        req: tracker_pb::InvokeRequest,
        deadline: Option<Duration>,
    ) -> Result<tracker_pb::InvokeResponse, ClankieError> {
        let role = Role::from_wire(req.role)
            .ok_or_else(|| ErrorCode::InvalidArgument.err("a tracker call names its role"))?;
        if req.actor.is_empty() || req.actor.len() > 200 {
            return Err(ErrorCode::InvalidArgument.err("an actor is 1 to 200 bytes"));
        }
        let args: Value = if req.arguments_json.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(&req.arguments_json).map_err(|e| {
                ErrorCode::ArgumentsInvalid.err(format!("arguments are not JSON: {e}"))
            })?
        };
        let caller = Caller {
            actor: req.actor.clone(),
            role,
        };
        let wait = if req.tool == "list_changes" {
            let asked = args
                .get("waitMs")
                .and_then(Value::as_u64)
                .map(Duration::from_millis)
                .unwrap_or_default()
                .min(MAX_WAIT);
            // Answer a little before the caller gives up.
            deadline.map_or(asked, |d| {
                asked.min(d.saturating_sub(Duration::from_millis(200)))
            })
        } else {
            Duration::ZERO
        };
        let until = tokio::time::Instant::now() + wait;
        let mut seen = self.inner.cursor.subscribe();
        loop {
            seen.mark_unchanged();
            let (tool, args2, caller2) = (req.tool.clone(), args.clone(), caller.clone());
            let scope = req.scope_team.clone();
            let route = req.linear_route.clone();
            let (result, cursor) = self
                .with_store(move |s| match route {
                    Some(r) => {
                        let slot = LeaseSlot::Route {
                            resource: r.resource,
                            project: r.project,
                        };
                        tools::invoke_route(s, &caller2, &slot, &tool, args2).map_err(store_refusal)
                    }
                    None => {
                        check_scope(s, &scope, &tool, &args2)?;
                        tools::invoke(s, &caller2, &tool, args2).map_err(store_refusal)
                    }
                })
                .await?;
            let empty = result
                .get("changes")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
            if !empty || wait.is_zero() || tokio::time::Instant::now() >= until {
                return Ok(tracker_pb::InvokeResponse {
                    replayed: result.get("replayed").and_then(Value::as_bool) == Some(true),
                    result_json: result.to_string(),
                    cursor,
                });
            }
            if tokio::time::timeout_at(until, seen.changed())
                .await
                .is_err()
            {
                // One last read at the deadline, so a commit that raced the
                // timer is not missed.
                let (tool, args2, caller2) = (req.tool.clone(), args.clone(), caller.clone());
                let (result, cursor) = self
                    .with_store(move |s| {
                        tools::invoke(s, &caller2, &tool, args2).map_err(store_refusal)
                    })
                    .await?;
                return Ok(tracker_pb::InvokeResponse {
                    replayed: false,
                    result_json: result.to_string(),
                    cursor,
                });
            }
        }
    }
}

#[tonic::async_trait]
impl tracker_pb::tracker_server::Tracker for TrackerService {
    async fn invoke(
        &self,
        request: Request<tracker_pb::InvokeRequest>,
    ) -> Result<Response<tracker_pb::InvokeResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let deadline = grpc::deadline(request.metadata());
        let req = request.into_inner();
        let role = clankie_types::Role::wire_word(req.role);
        let span = tracing::info_span!("tracker.invoke", tool = %req.tool, role);
        let out = TrackerService::invoke(self, req, deadline)
            .instrument(span)
            .await
            .map_err(refuse)?;
        Ok(Response::new(out))
    }

    async fn owns_item(
        &self,
        request: Request<tracker_pb::OwnsItemRequest>,
    ) -> Result<Response<tracker_pb::OwnsItemResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let refs = request.into_inner().references;
        if refs.len() > 32 {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("at most 32 references at once"),
            ));
        }
        let (owned, _) = self
            .with_store(move |s| {
                let mut owned = Vec::new();
                for r in refs {
                    if s.owns_item(&r).map_err(store_refusal)? {
                        owned.push(r);
                    }
                }
                Ok(owned)
            })
            .await
            .map_err(refuse)?;
        Ok(Response::new(tracker_pb::OwnsItemResponse { owned }))
    }

    async fn create_team(
        &self,
        request: Request<tracker_pb::CreateTeamRequest>,
    ) -> Result<Response<tracker_pb::TeamInfo>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let req = request.into_inner();
        let (team, _) = self
            .with_store(move |s| {
                if req.cut_over {
                    s.cut_over_team(&req.key, &req.name, "owner")
                } else {
                    s.create_team(&req.key, &req.name, "owner")
                }
                .map_err(store_refusal)
            })
            .await
            .map_err(refuse)?;
        Ok(Response::new(tracker_pb::TeamInfo {
            id: team.id,
            key: team.key,
            name: team.name,
        }))
    }

    async fn import_issue(
        &self,
        request: Request<tracker_pb::ImportIssueRequest>,
    ) -> Result<Response<tracker_pb::InvokeResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let r = request.into_inner();
        let (issue, cursor) = self
            .with_store(move |s| {
                s.import_issue(
                    &r.team,
                    &r.identifier,
                    &r.linear_uuid,
                    &r.title,
                    &r.description,
                    &r.state,
                    "owner",
                )
                .map_err(store_refusal)
            })
            .await
            .map_err(refuse)?;
        Ok(Response::new(tracker_pb::InvokeResponse {
            result_json: serde_json::json!({ "issue": issue }).to_string(),
            replayed: false,
            cursor,
        }))
    }

    async fn retire_hire(
        &self,
        request: Request<tracker_pb::RetireHireRequest>,
    ) -> Result<Response<tracker_pb::RetireHireResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let req = request.into_inner();
        let released = self.retire(req).await.map_err(refuse)?;
        Ok(Response::new(tracker_pb::RetireHireResponse { released }))
    }

    async fn ownership(
        &self,
        request: Request<tracker_pb::OwnershipRequest>,
    ) -> Result<Response<tracker_pb::OwnershipResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let (rows, _) = self
            .with_store(|s| s.lease_ownership().map_err(store_refusal))
            .await
            .map_err(refuse)?;
        Ok(Response::new(tracker_pb::OwnershipResponse {
            owned: rows
                .into_iter()
                .map(|(scope, holder, leases)| tracker_pb::OwnedLeases {
                    scope,
                    holder,
                    leases,
                })
                .collect(),
        }))
    }

    async fn stats(
        &self,
        request: Request<tracker_pb::StatsRequest>,
    ) -> Result<Response<tracker_pb::StatsResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let actor = request.into_inner().actor;
        let (writes, cursor) = self
            .with_store(move |s| {
                if actor.is_empty() {
                    Ok(0)
                } else {
                    s.count_writes(&actor).map_err(store_refusal)
                }
            })
            .await
            .map_err(refuse)?;
        Ok(Response::new(tracker_pb::StatsResponse {
            cursor,
            actor_writes: writes,
        }))
    }
}

impl clankie_runtime::main_kit::Served for TrackerService {
    fn routes(&self) -> tonic::service::Routes {
        TrackerService::routes(self)
    }

    fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        TrackerService::readiness(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, role: i32, args: &str) -> tracker_pb::InvokeRequest {
        tracker_pb::InvokeRequest {
            tool: tool.into(),
            arguments_json: args.into(),
            actor: "hire:h1".into(),
            role,
            scope_team: String::new(),
            linear_route: None,
        }
    }

    /// The role comes from the host's hire ledger; a call that names none
    /// (or one this build does not know) is refused before any tool runs,
    /// never served as some default role.
    #[tokio::test]
    async fn a_call_without_a_known_role_is_refused_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let svc = TrackerService::open(&dir.path().join("tracker"), OwnerCheck::from_token("t"));
        let write = r#"{"team": "eng", "title": "from nowhere"}"#;
        for role in [0, 99] {
            let refused = svc
                .invoke(call("save_issue", role, write), None)
                .await
                .expect_err("refused");
            assert_eq!(refused.code, ErrorCode::InvalidArgument, "{role}");
        }
        assert_eq!(*svc.inner.cursor.borrow(), 0, "nothing was committed");
        // The same write with a known role reaches the tool, which answers
        // otherwise: the refusal above was the role's.
        let served = svc
            .invoke(call("save_issue", Role::Lead.wire(), write), None)
            .await;
        assert!(
            served
                .as_ref()
                .map_or_else(|e| e.code != ErrorCode::InvalidArgument, |_| true),
            "{served:?}"
        );
        svc.invoke(call("list_teams", Role::Worker.wire(), "{}"), None)
            .await
            .expect("a known role is served");
    }
}
