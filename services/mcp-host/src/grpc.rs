//! The gRPC surface of the mcp-host: owner RPCs (accounts, receipt stats,
//! tracker budgets and profiles) and fleet RPCs (catalog, search, describe,
//! call, receipt), each checking its caller before anything else.

use std::pin::Pin;
use std::time::Duration;

use clankie_proto::mcphost::v1 as pb;
use clankie_runtime::grpc;
use clankie_runtime::refuse::mcp_host as refuse;
use clankie_runtime::{ErrorCode, now_ms};
use serde_json::Value;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::accounts::Transport;
use crate::{DEFAULT_BUDGET, McpHost, Who, catalog, tracker};

type CatalogStream = Pin<Box<dyn Stream<Item = Result<pb::CatalogInfo, Status>> + Send>>;

#[tonic::async_trait]
impl pb::mcp_host_server::McpHost for McpHost {
    async fn connect_account(
        &self,
        request: Request<pb::ConnectRequest>,
    ) -> Result<Response<pb::ConnectResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        let req = request.into_inner();
        let transport = Transport::from_pb(req.transport).map_err(refuse)?;
        let wait = Duration::from_millis(u64::from(req.wait_verified_ms.min(60_000)));
        let account = self
            .inner
            .accounts
            .connect(&req.name, transport, wait)
            .await
            .map_err(refuse)?;
        Ok(Response::new(pb::ConnectResponse {
            account: Some(account),
        }))
    }

    async fn disconnect_account(
        &self,
        request: Request<pb::DisconnectRequest>,
    ) -> Result<Response<pb::DisconnectResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        let removed = self
            .inner
            .accounts
            .disconnect(&request.into_inner().name)
            .map_err(refuse)?;
        Ok(Response::new(pb::DisconnectResponse { removed }))
    }

    async fn list_accounts(
        &self,
        request: Request<pb::ListAccountsRequest>,
    ) -> Result<Response<pb::ListAccountsResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        Ok(Response::new(pb::ListAccountsResponse {
            accounts: self.inner.accounts.list(),
            revision: self.catalog().revision,
        }))
    }

    async fn receipt_stats(
        &self,
        request: Request<pb::ReceiptStatsRequest>,
    ) -> Result<Response<pb::ReceiptStatsResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        let s = self.inner.receipts.stats();
        Ok(Response::new(pb::ReceiptStatsResponse {
            healthy: s.problem.is_none(),
            problem: s.problem.unwrap_or_default(),
            records: s.records,
            uncertain: s.uncertain,
            pending: s.pending,
            trimmed: s.trimmed,
            buckets: s.buckets,
            commits: s.commits,
            synced_writes: s.synced_writes,
        }))
    }

    async fn catalog(
        &self,
        request: Request<pb::CatalogRequest>,
    ) -> Result<Response<pb::CatalogInfo>, Status> {
        let ticket = Self::ticket(&request).map_err(refuse)?;
        self.recheck(&ticket, false).await.map_err(refuse)?;
        Ok(Response::new(Self::catalog_info(&self.catalog())))
    }

    type WatchCatalogStream = CatalogStream;

    async fn watch_catalog(
        &self,
        _request: Request<pb::CatalogRequest>,
    ) -> Result<Response<Self::WatchCatalogStream>, Status> {
        use tokio_stream::StreamExt as _;
        let rx = self.inner.catalog.clone();
        let stream =
            tokio_stream::wrappers::WatchStream::new(rx).map(|c| Ok(Self::catalog_info(&c)));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn search_tools(
        &self,
        request: Request<pb::SearchToolsRequest>,
    ) -> Result<Response<pb::SearchToolsResponse>, Status> {
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
        Ok(Response::new(pb::SearchToolsResponse {
            tools: hits
                .iter()
                .map(|e| pb::ToolSummary {
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
        request: Request<pb::DescribeToolsRequest>,
    ) -> Result<Response<pb::DescribeToolsResponse>, Status> {
        let (catalog, role) = self.fleet_catalog(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        Ok(Response::new(pb::DescribeToolsResponse {
            tools: catalog
                .describe_visible(&req.names, |e| {
                    !e.builtin || tracker::visible_schema(&e.tool, role).is_some()
                })
                .iter()
                .map(|e| pb::ToolDescription {
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
        request: Request<pb::CallToolRequest>,
    ) -> Result<Response<pb::CallResult>, Status> {
        let who = match grpc::ticket(request.metadata()) {
            Some(t) => Who::Fleet(t.to_string()),
            None if clankie_runtime::owner::bearer(request.metadata()).is_some() => {
                self.inner
                    .owner
                    .verify(request.metadata())
                    .map_err(refuse)?;
                Who::Owner
            }
            None => {
                return Err(refuse(
                    ErrorCode::FleetCredentialRequired
                        .err("the request carries no admission ticket"),
                ));
            }
        };
        let budget = grpc::deadline(request.metadata())
            .unwrap_or(DEFAULT_BUDGET)
            .min(DEFAULT_BUDGET);
        let result = self
            .call_as(&who, request.into_inner(), budget)
            .await
            .map_err(refuse)?;
        Ok(Response::new(result))
    }

    async fn tracker_budgets(
        &self,
        request: Request<pb::TrackerBudgetsRequest>,
    ) -> Result<Response<pb::TrackerBudgetsResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        Ok(Response::new(pb::TrackerBudgetsResponse {
            requests_per_hour: tracker::REQUESTS_PER_HOUR,
            writes_per_minute: tracker::WRITES_PER_MINUTE,
            actors: self.inner.budgets.snapshot(now_ms()),
        }))
    }

    async fn tracker_profiles(
        &self,
        request: Request<pb::TrackerProfilesRequest>,
    ) -> Result<Response<pb::TrackerProfilesResponse>, Status> {
        self.inner.owner.verify(request.metadata())?;
        Ok(Response::new(pb::TrackerProfilesResponse {
            roles: tracker::profiles(),
        }))
    }

    async fn get_receipt(
        &self,
        request: Request<pb::GetReceiptRequest>,
    ) -> Result<Response<pb::CallResult>, Status> {
        let ticket = Self::ticket(&request).map_err(refuse)?;
        let id = request.into_inner().receipt_id;
        let result = self.receipt(&ticket, &id).await.map_err(refuse)?;
        Ok(Response::new(result))
    }
}
