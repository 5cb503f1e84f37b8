//! The gRPC surface of the mcp-host: owner RPCs (accounts, receipt stats,
//! tracker budgets and profiles) and fleet RPCs (catalog, search, describe,
//! call, receipt), each checking its caller before anything else.

use std::pin::Pin;
use std::time::Duration;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::grpc;
use clankie_runtime::refuse::mcp_host as refuse;
use clankie_runtime::{ErrorCode, now_ms};
use serde_json::Value;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::accounts::Transport;
use crate::grants::serve::grant_pb;
use crate::{DEFAULT_BUDGET, McpHost, Requester, catalog, relay, tracker};

type CatalogStream = Pin<Box<dyn Stream<Item = Result<mcphost_pb::CatalogInfo, Status>> + Send>>;
type RevocationStream = Pin<Box<dyn Stream<Item = Result<mcphost_pb::Revocation, Status>> + Send>>;
type EventStream = Pin<Box<dyn Stream<Item = Result<mcphost_pb::CallEvent, Status>> + Send>>;
type LogStream = Pin<Box<dyn Stream<Item = Result<mcphost_pb::LogLine, Status>> + Send>>;

#[tonic::async_trait]
impl mcphost_pb::mcp_host_server::McpHost for McpHost {
    async fn connect_account(
        &self,
        request: Request<mcphost_pb::ConnectRequest>,
    ) -> Result<Response<mcphost_pb::ConnectResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let req = request.into_inner();
        let transport = Transport::from_pb(req.transport).map_err(refuse)?;
        let wait = Duration::from_millis(u64::from(req.wait_verified_ms.min(60_000)));
        let mut account = self
            .inner
            .accounts
            .connect(&req.name, transport, wait)
            .await
            .map_err(refuse)?;
        // A server that offers an identity is verified as it connects, on
        // the generation just verified; a failed read records nothing.
        if self
            .inner
            .accounts
            .offers(&req.name, &crate::verify::IDENTITY_TOOLS)
        {
            match self.verify_account(&req.name).await {
                Ok(v) => account.provider_identity = v.identity,
                Err(e) => tracing::warn!(
                    account = %req.name,
                    reason = e.code.as_str(),
                    "account.identity_unverified"
                ),
            }
        }
        Ok(Response::new(mcphost_pb::ConnectResponse {
            account: Some(account),
        }))
    }

    async fn disconnect_account(
        &self,
        request: Request<mcphost_pb::DisconnectRequest>,
    ) -> Result<Response<mcphost_pb::DisconnectResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let removed = self
            .inner
            .accounts
            .disconnect(&request.into_inner().name)
            .map_err(refuse)?;
        Ok(Response::new(mcphost_pb::DisconnectResponse { removed }))
    }

    async fn list_accounts(
        &self,
        request: Request<mcphost_pb::ListAccountsRequest>,
    ) -> Result<Response<mcphost_pb::ListAccountsResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let mut accounts = self.inner.accounts.list();
        for a in &mut accounts {
            a.provider_identity = self
                .inner
                .identities
                .get(&a.name)
                .map(|i| crate::verify::identity_pb(&i));
        }
        Ok(Response::new(mcphost_pb::ListAccountsResponse {
            accounts,
            revision: self.catalog().revision,
        }))
    }

    async fn receipt_stats(
        &self,
        request: Request<mcphost_pb::ReceiptStatsRequest>,
    ) -> Result<Response<mcphost_pb::ReceiptStatsResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let s = self.inner.receipts.stats();
        Ok(Response::new(mcphost_pb::ReceiptStatsResponse {
            healthy: s.problem.is_none(),
            problem: s.problem.unwrap_or_default(),
            records: s.records,
            uncertain: s.uncertain,
            pending: s.pending,
            trimmed: s.trimmed,
            buckets: s.buckets,
            commits: s.commits,
            synced_writes: s.synced_writes,
            stalled: s
                .stalled
                .into_iter()
                .map(|r| mcphost_pb::StalledCall {
                    owner: r.owner,
                    receipt_id: r.receipt_id,
                    name: r.name,
                    settled: r.status == crate::receipts::Status::Settled,
                    detail: r.detail.unwrap_or_default(),
                    dispatched_at_ms: r.dispatched_at_ms,
                })
                .collect(),
            recent: s
                .recent
                .into_iter()
                .map(|r| mcphost_pb::RecentCall {
                    settled: r.status == crate::receipts::Status::Settled,
                    outcome: clankie_types::fleet::Outcome::wire_or_unspecified(r.outcome),
                    receipt_id: r.receipt_id,
                    name: r.name,
                    account: r.account,
                    detail: r.detail.unwrap_or_default(),
                    dispatched_at_ms: r.dispatched_at_ms,
                    settled_at_ms: r.settled_at_ms.unwrap_or_default(),
                })
                .collect(),
        }))
    }

    async fn work_item_write(
        &self,
        request: Request<mcphost_pb::WorkItemWriteRequest>,
    ) -> Result<Response<mcphost_pb::WorkItemWriteResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let answer = McpHost::work_item_write(self, request.into_inner())
            .await
            .map_err(refuse)?;
        Ok(Response::new(answer))
    }

    async fn work_item_receipt(
        &self,
        request: Request<mcphost_pb::WorkItemReceiptRequest>,
    ) -> Result<Response<mcphost_pb::WorkItemWriteResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let id = request.into_inner().request_id;
        let answer = McpHost::work_item_receipt(self, &id)
            .await
            .map_err(refuse)?;
        Ok(Response::new(answer))
    }

    async fn degraded(
        &self,
        _request: Request<mcphost_pb::DegradedRequest>,
    ) -> Result<Response<mcphost_pb::DegradedResponse>, Status> {
        Ok(Response::new(mcphost_pb::DegradedResponse {
            accounts: self.inner.accounts.degraded(),
        }))
    }

    async fn catalog(
        &self,
        request: Request<mcphost_pb::CatalogRequest>,
    ) -> Result<Response<mcphost_pb::CatalogInfo>, Status> {
        let ticket = Self::ticket(&request).map_err(refuse)?;
        self.recheck(&ticket, false).await.map_err(refuse)?;
        Ok(Response::new(Self::catalog_info(&self.catalog())))
    }

    type WatchCatalogStream = CatalogStream;

    async fn watch_catalog(
        &self,
        _request: Request<mcphost_pb::CatalogRequest>,
    ) -> Result<Response<Self::WatchCatalogStream>, Status> {
        use tokio_stream::StreamExt as _;
        let rx = self.inner.catalog.clone();
        let stream =
            tokio_stream::wrappers::WatchStream::new(rx).map(|c| Ok(Self::catalog_info(&c)));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn search_tools(
        &self,
        request: Request<mcphost_pb::SearchToolsRequest>,
    ) -> Result<Response<mcphost_pb::SearchToolsResponse>, Status> {
        let (catalog, role) = self.fleet_catalog(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        if req.query.len() > 1024 {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("query is longer than 1024 bytes"),
            ));
        }
        let limit = if req.limit == 0 {
            catalog::MAX_SEARCH
        } else {
            req.limit as usize
        };
        let (hits, total) = catalog.search_visible(&req.query, limit, |e| {
            !e.builtin || tracker::visible_schema(&e.tool, role).is_some()
        });
        Ok(Response::new(mcphost_pb::SearchToolsResponse {
            tools: hits
                .iter()
                .map(|e| mcphost_pb::ToolSummary {
                    name: e.qualified.clone(),
                    description: e.one_line(),
                })
                .collect(),
            revision: catalog.revision,
            total_matches: total as u32,
        }))
    }

    async fn describe_tools(
        &self,
        request: Request<mcphost_pb::DescribeToolsRequest>,
    ) -> Result<Response<mcphost_pb::DescribeToolsResponse>, Status> {
        let (catalog, role) = self.fleet_catalog(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        Ok(Response::new(mcphost_pb::DescribeToolsResponse {
            tools: catalog
                .describe_visible(&req.names, |e| {
                    !e.builtin || tracker::visible_schema(&e.tool, role).is_some()
                })
                .iter()
                .map(|e| mcphost_pb::ToolDescription {
                    name: e.qualified.clone(),
                    description: e.description.clone(),
                    input_schema_json: if e.builtin {
                        tracker::visible_schema(&e.tool, role).unwrap_or(Value::Null)
                    } else {
                        Value::Object((*e.schema).clone())
                    }
                    .to_string(),
                })
                .collect(),
            revision: catalog.revision,
        }))
    }

    async fn call_tool(
        &self,
        request: Request<mcphost_pb::CallToolRequest>,
    ) -> Result<Response<mcphost_pb::CallResult>, Status> {
        let (who, budget) = self.call_caller(&request)?;
        let mut call = Running::start(self, who, request.into_inner(), budget, Default::default());
        let result = call.result().await?;
        Ok(Response::new(result))
    }

    type CallToolEventsStream = EventStream;

    async fn call_tool_events(
        &self,
        request: Request<mcphost_pb::CallToolRequest>,
    ) -> Result<Response<Self::CallToolEventsStream>, Status> {
        let (who, budget) = self.call_caller(&request)?;
        let req = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(relay::CALL_DEPTH);
        let listen = relay::Listen {
            events: Some(tx),
            progress: req.progress,
            // Only a grant call hears its own lines; fleet sessions read
            // the account-wide feed (WatchLogs).
            log_level: match who {
                Requester::Grant(_) => req.log_level.clone(),
                Requester::Fleet(_) | Requester::Owner => String::new(),
            },
        };
        let call = Running::start(self, who, req, budget, listen);
        Ok(Response::new(call.events(rx)))
    }

    type WatchLogsStream = LogStream;

    async fn watch_logs(
        &self,
        _request: Request<mcphost_pb::WatchLogsRequest>,
    ) -> Result<Response<Self::WatchLogsStream>, Status> {
        use tokio_stream::StreamExt as _;
        let feed = tokio_stream::wrappers::BroadcastStream::new(self.inner.accounts.relay().logs());
        // A lagging reader misses lines; log lines are advisory.
        let stream = feed.filter_map(|line| line.ok().map(Ok));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn tracker_budgets(
        &self,
        request: Request<mcphost_pb::TrackerBudgetsRequest>,
    ) -> Result<Response<mcphost_pb::TrackerBudgetsResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        Ok(Response::new(mcphost_pb::TrackerBudgetsResponse {
            requests_per_hour: tracker::REQUESTS_PER_HOUR,
            writes_per_minute: tracker::WRITES_PER_MINUTE,
            actors: self.inner.budgets.snapshot(now_ms()),
        }))
    }

    async fn tracker_profiles(
        &self,
        request: Request<mcphost_pb::TrackerProfilesRequest>,
    ) -> Result<Response<mcphost_pb::TrackerProfilesResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        Ok(Response::new(mcphost_pb::TrackerProfilesResponse {
            roles: tracker::profiles(),
        }))
    }

    async fn get_receipt(
        &self,
        request: Request<mcphost_pb::GetReceiptRequest>,
    ) -> Result<Response<mcphost_pb::CallResult>, Status> {
        let who = match self.grant_caller(request.metadata()) {
            Some(caller) => caller.map_err(refuse)?,
            None => Requester::Fleet(Self::ticket(&request).map_err(refuse)?),
        };
        let id = request.into_inner().receipt_id;
        let result = self.receipt(&who, &id).await.map_err(refuse)?;
        Ok(Response::new(result))
    }

    async fn cancel_call(
        &self,
        request: Request<mcphost_pb::CancelCallRequest>,
    ) -> Result<Response<mcphost_pb::CancelCallResponse>, Status> {
        let who = match self.grant_caller(request.metadata()) {
            Some(caller) => caller.map_err(refuse)?,
            None => Requester::Fleet(Self::ticket(&request).map_err(refuse)?),
        };
        let id = request.into_inner().receipt_id;
        let cancelled = self.cancel_call(&who, &id).await.map_err(refuse)?;
        Ok(Response::new(mcphost_pb::CancelCallResponse { cancelled }))
    }

    async fn validate_linear_project(
        &self,
        request: Request<mcphost_pb::ValidateLinearProjectRequest>,
    ) -> Result<Response<mcphost_pb::LinearProject>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let id = request.into_inner().project_id;
        let project = self.linear_project(&id).await.map_err(refuse)?;
        Ok(Response::new(project))
    }

    async fn verify_account(
        &self,
        request: Request<mcphost_pb::VerifyAccountRequest>,
    ) -> Result<Response<mcphost_pb::VerifyAccountResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let name = request.into_inner().name;
        let verified = self.verify_account(&name).await.map_err(refuse)?;
        Ok(Response::new(verified))
    }

    async fn issue_grant(
        &self,
        request: Request<mcphost_pb::IssueGrantRequest>,
    ) -> Result<Response<mcphost_pb::IssueGrantResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let issued = self.issue_grant(request.into_inner()).map_err(refuse)?;
        Ok(Response::new(issued))
    }

    async fn list_grants(
        &self,
        request: Request<mcphost_pb::ListGrantsRequest>,
    ) -> Result<Response<mcphost_pb::ListGrantsResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let grants = self.inner.grants.list().map_err(refuse)?;
        Ok(Response::new(mcphost_pb::ListGrantsResponse {
            grants: grants.iter().map(grant_pb).collect(),
        }))
    }

    async fn revoke_grant(
        &self,
        request: Request<mcphost_pb::RevokeGrantRequest>,
    ) -> Result<Response<mcphost_pb::Grant>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let id = request.into_inner().grant_id;
        let revoked = self.inner.grants.revoke(&id).map_err(refuse)?;
        tracing::info!(grant = %revoked.grant_id, "grant.revoked");
        Ok(Response::new(grant_pb(&revoked)))
    }

    async fn keep_project_grant(
        &self,
        request: Request<mcphost_pb::KeepProjectGrantRequest>,
    ) -> Result<Response<mcphost_pb::Grant>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let req = request.into_inner();
        if req.project.trim().is_empty() || req.server.trim().is_empty() {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("a project record names a project and a server"),
            ));
        }
        let tools = req
            .tools
            .into_iter()
            .map(|name| crate::grants::GrantedTool {
                name,
                arguments: Default::default(),
                forbidden_arguments: Vec::new(),
            })
            .collect();
        let kept = self
            .inner
            .grants
            .keep_project_record(&req.project, &req.server, tools)
            .map_err(refuse)?;
        Ok(Response::new(grant_pb(&kept)))
    }

    async fn authenticate_grant(
        &self,
        request: Request<mcphost_pb::AuthenticateGrantRequest>,
    ) -> Result<Response<mcphost_pb::Grant>, Status> {
        let grant = self
            .inner
            .grants
            .authenticate(&request.into_inner().bearer)
            .map_err(refuse)?;
        Ok(Response::new(grant_pb(&grant)))
    }

    async fn grant_tools(
        &self,
        request: Request<mcphost_pb::GrantToolsRequest>,
    ) -> Result<Response<mcphost_pb::GrantToolsResponse>, Status> {
        let caller = match self.grant_caller(request.metadata()) {
            Some(Ok(Requester::Grant(caller))) => caller,
            Some(Err(e)) => return Err(refuse(e)),
            _ => {
                return Err(refuse(
                    ErrorCode::GrantInvalid.err("the request carries no grant bearer"),
                ));
            }
        };
        Ok(Response::new(mcphost_pb::GrantToolsResponse {
            grant: Some(grant_pb(&caller.grant)),
            tools: self.grant_tools(&caller),
        }))
    }

    type WatchRevocationsStream = RevocationStream;

    async fn watch_revocations(
        &self,
        _request: Request<mcphost_pb::WatchRevocationsRequest>,
    ) -> Result<Response<Self::WatchRevocationsStream>, Status> {
        use tokio_stream::StreamExt as _;
        let feed = tokio_stream::wrappers::BroadcastStream::new(self.inner.grants.revocations());
        // A lagging reader missed some ids: it hears an empty id, and
        // then rechecks every grant session it holds.
        let stream = feed.map(|id| {
            Ok(mcphost_pb::Revocation {
                grant_id: id.unwrap_or_default(),
            })
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

impl McpHost {
    /// Who a call comes from (a grant bearer, an admission ticket, or the
    /// owner credential) and the budget its deadline leaves.
    fn call_caller<T>(&self, request: &Request<T>) -> Result<(Requester, Duration), Status> {
        let granted = self.grant_caller(request.metadata());
        let who = match (granted, grpc::ticket(request.metadata())) {
            (Some(caller), _) => caller.map_err(refuse)?,
            (None, Some(t)) => Requester::Fleet(t.to_string()),
            (None, None) if clankie_runtime::owner::bearer(request.metadata()).is_some() => {
                self.inner
                    .owner
                    .verify(request.metadata())
                    .map_err(refuse)?;
                Requester::Owner
            }
            (None, None) => {
                return Err(refuse(
                    ErrorCode::FleetCredentialRequired
                        .err("the request carries no admission ticket"),
                ));
            }
        };
        let budget = grpc::deadline(request.metadata())
            .unwrap_or(DEFAULT_BUDGET)
            .min(DEFAULT_BUDGET);
        Ok((who, budget))
    }
}

/// One call running in a task of its own, so a caller that goes away (a
/// cancel, a dropped connection) never cuts it between its durable receipt
/// and its dispatch. Dropping this before the result cancels `gone`, which
/// the call checks at its dispatch boundary.
struct Running {
    task: tokio::task::JoinHandle<Result<mcphost_pb::CallResult, clankie_runtime::ClankieError>>,
    gone: Option<tokio_util::sync::DropGuard>,
}

impl Running {
    fn start(
        host: &McpHost,
        who: Requester,
        req: mcphost_pb::CallToolRequest,
        budget: Duration,
        listen: relay::Listen,
    ) -> Running {
        let gone = tokio_util::sync::CancellationToken::new();
        let guard = gone.clone().drop_guard();
        let host = host.clone();
        // The task carries the request's span, so the call stays in the
        // caller's trace.
        let task = tokio::spawn(tracing::Instrument::instrument(
            async move { host.call_as(&who, req, budget, Some(gone), listen).await },
            tracing::Span::current(),
        ));
        Running {
            task,
            gone: Some(guard),
        }
    }

    /// The call's answer; from here a dropped caller changes nothing.
    async fn result(&mut self) -> Result<mcphost_pb::CallResult, Status> {
        let joined = (&mut self.task).await;
        if let Some(g) = self.gone.take() {
            g.disarm();
        }
        joined
            .map_err(|_| refuse(ErrorCode::Internal.err("the call's task failed")))?
            .map_err(refuse)
    }

    /// The events the call hears while it runs, then its result, last. The
    /// stream holds the call: dropping it before the end is going away.
    fn events(self, rx: tokio::sync::mpsc::Receiver<mcphost_pb::CallEvent>) -> EventStream {
        let stream = futures::stream::unfold(Some((self, rx)), |state| async move {
            let (mut call, mut rx) = state?;
            tokio::select! {
                biased;
                Some(event) = rx.recv() => Some((Ok(event), Some((call, rx)))),
                result = call.result() => Some((
                    result.map(|r| mcphost_pb::CallEvent {
                        event: Some(mcphost_pb::call_event::Event::Result(r)),
                    }),
                    None,
                )),
            }
        });
        Box::pin(stream)
    }
}
