//! The mcp-host service.
//!
//! Owns: connected accounts (real upstream MCP servers), the catalog of
//! qualified names and its revision, the bridge's search/describe/call, the
//! durable connected-call receipts and the provider-call audit.
//!
//! Does not own: admission or the fleet switch. Before every dispatch it asks
//! the admission service to recheck the request's ticket (admission, then the
//! switch), then runs its own account/configuration fence, in that order,
//! after every other await. A call already past those checks may still reach
//! the provider after a change: the switch stops new calls, and a call
//! already dispatched is left to settle, never cut off mid-flight.

pub mod accounts;
pub mod audit;
mod call;
pub mod catalog;
pub mod grants;
mod grpc;
pub mod identity;
mod metrics;
pub mod receipts;
pub mod relay;
pub mod tracker;
mod verify;
mod work_items;

use crate::accounts::Registry;
use crate::catalog::Catalog;
use crate::receipts::{ReceiptStore, Record};
use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::common::v1::{FleetTools, Principal};
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_proto::tracker::v1 as tracker_pb;
use clankie_runtime::clients::Answer as _;
use clankie_runtime::clients::{Call, INTERNAL};
use clankie_runtime::grpc::{Client, Meta};
use clankie_runtime::owner::OwnerCheck;
use clankie_runtime::paths::StatePaths;
use clankie_runtime::{ClankieError, ErrorCode};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::Request;

/// The total budget of a request when the caller sets none.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(30);

/// How long a dispatched call may still settle its receipt after its caller
/// stopped waiting.
pub const COMPLETION_LIFETIME: Duration = Duration::from_secs(600);

/// Settled bodies kept before retention trims older ones.
pub const DEFAULT_RETAINED_BODIES: usize = 10_000;

/// Reply this long before the caller's deadline, so "uncertain" arrives.
pub(crate) const REPLY_MARGIN: Duration = Duration::from_millis(300);

/// Options for the mcp-host.
pub struct Options {
    pub paths: StatePaths,
    pub retained_bodies: usize,
}

impl Options {
    pub fn new(paths: StatePaths) -> Self {
        Options {
            paths,
            retained_bodies: DEFAULT_RETAINED_BODIES,
        }
    }

    /// Opens state and starts every account's supervisor.
    pub async fn build(self, shutdown: CancellationToken) -> anyhow::Result<McpHost> {
        let owner = OwnerCheck::load(&self.paths.owner_credential())?;
        let receipts = ReceiptStore::open(&self.paths.receipts_dir(), self.retained_bodies)?;
        if let Err(e) = receipts.health() {
            tracing::error!(reason = e.code.as_str(), problem = %e.message, "receipt store refused");
        }
        let accounts = Registry::open(
            self.paths.service_dir("mcp-host"),
            self.paths.logs_dir().join("accounts"),
            shutdown,
        )?;
        let audit = audit::Audit::open(&self.paths.audit_dir())?;
        let admission = clankie_runtime::clients::admission(&self.paths, Meta::default());
        let owner_token = clankie_runtime::owner::read_owner_token(&self.paths.owner_credential())?;
        let mailbox = clankie_runtime::clients::mailbox(&self.paths, Meta::default());
        let tracker_client = clankie_runtime::clients::tracker(&self.paths, Meta::default());
        let grants = grants::Grants::open(self.paths.grants_file());
        let identities =
            identity::Identities::open(self.paths.service_dir("mcp-host").join("identities.json"));
        Ok(McpHost {
            inner: Arc::new(Inner {
                owner,
                catalog: accounts.catalog(),
                accounts,
                receipts,
                audit,
                admission,
                mailbox,
                tracker: tracker_client,
                owner_token,
                budgets: tracker::Budgets::default(),
                grants,
                identities,
                cancels: call::Cancels::default(),
            }),
        })
    }
}

struct Inner {
    owner: OwnerCheck,
    accounts: Registry,
    catalog: watch::Receiver<Arc<Catalog>>,
    receipts: ReceiptStore,
    audit: audit::Audit,
    admission: admission_pb::admission_client::AdmissionClient<Client>,
    mailbox: mailbox_pb::mailbox_client::MailboxClient<Client>,
    tracker: tracker_pb::tracker_client::TrackerClient<Client>,
    /// The owner credential, for the host's own calls to the tracker and the
    /// mailbox's owner route.
    owner_token: String,
    budgets: tracker::Budgets,
    grants: grants::Grants,
    identities: identity::Identities,
    /// The calls a caller can still cancel, by receipt id.
    cancels: call::Cancels,
}

/// Who a call comes from: an admitted fleet request, or the owner's route.
#[derive(Debug, Clone)]
pub enum Requester {
    Fleet(String),
    Owner,
    /// A manual grant's session (its own principal, never a fleet's).
    Grant(Box<grants::serve::GrantCaller>),
}

/// The mcp-host service; cheap to clone.
#[derive(Clone)]
pub struct McpHost {
    inner: Arc<Inner>,
}

/// The audit principal: `fleet:ID:pane:PANE`, `pane:unverified` for
/// bearers, `fleet:ID:machine:M:pane:PANE` for a pane of a remote machine.
pub fn audit_principal(p: &Principal) -> String {
    clankie_runtime::principal::actor(p)
}

/// Whose a call is: the owner route, or the principal admission proved.
pub(crate) fn owner_of(who: &Requester, principal: &Principal) -> String {
    match who {
        Requester::Owner => "owner".into(),
        Requester::Fleet(_) => clankie_runtime::principal::owner_key(principal),
        Requester::Grant(g) => format!("grant:{}", g.grant.grant_id),
    }
}

/// The audit principal text a record of this caller carries.
pub(crate) fn audit_text(who: &Requester, principal: &Principal) -> String {
    match who {
        Requester::Owner => "owner".into(),
        Requester::Fleet(_) => audit_principal(principal),
        Requester::Grant(g) => g.grant.audit_principal(),
    }
}

pub(crate) fn arguments_hash(args: &Value) -> String {
    hex::encode(Sha256::digest(serde_json::to_vec(args).unwrap_or_default()))
}

pub(crate) fn result_pb(r: &Record, from_receipt: bool) -> mcphost_pb::CallResult {
    mcphost_pb::CallResult {
        receipt_id: r.receipt_id.clone(),
        outcome: r.visible_outcome().wire(),
        result_json: r.result.as_ref().map(|v| v.to_string()).unwrap_or_default(),
        name: r.name.clone(),
        dispatched_at_ms: r.dispatched_at_ms,
        settled_at_ms: r.settled_at_ms.unwrap_or(0),
        from_receipt,
        trimmed: r.trimmed,
        detail: r.detail.clone().unwrap_or_default(),
    }
}

impl McpHost {
    /// Ready while the receipt store is sound, the accounts file readable,
    /// and every account has had its first verdict since start.
    pub fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        let inner = self.inner.clone();
        clankie_runtime::readiness::Readiness::check(move || {
            if let Err(e) = inner.receipts.health() {
                return Some(format!("receipt store: {}", e.code));
            }
            if inner.accounts.unreadable() {
                return Some("accounts file unreadable".into());
            }
            inner
                .accounts
                .loading()
                .then(|| "the tool catalog is loading".into())
        })
    }

    /// The tonic routes for this service.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(
            mcphost_pb::mcp_host_server::McpHostServer::new(self.clone())
                .max_decoding_message_size(8 << 20)
                .max_encoding_message_size(16 << 20),
        )
    }

    /// Closes every account connection (after in-flight calls settle).
    pub async fn close(&self) {
        self.inner.accounts.close().await;
        // Outcomes recorded since the last commit become durable before
        // exit, checkpointed out of the journal.
        if let Err(e) = self.inner.receipts.close().await {
            tracing::error!(
                reason = e.code.as_str(),
                "receipt outcomes not made durable at stop"
            );
        }
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.inner.catalog.borrow().clone()
    }

    /// Admission, then the switch, for the ticket a request carries.
    pub(crate) async fn recheck(
        &self,
        ticket: &str,
        need_tools: bool,
    ) -> Result<Principal, ClankieError> {
        let req = Call::new(admission_pb::RecheckRequest {
            ticket: ticket.to_string(),
        })
        .timeout(INTERNAL)
        .request();
        let resp = self.inner.admission.clone().recheck(req).await.answer()?;
        let principal = resp
            .principal
            .ok_or_else(|| ErrorCode::Internal.err("admission answered without a principal"))?;
        let settings = resp.settings.unwrap_or_default();
        if need_tools && settings.unreadable {
            return Err(ErrorCode::SettingsUnreadable.err(
                "the fleet settings cannot be read, so fleet tools read as off until the owner repairs them",
            ));
        }
        if need_tools && settings.tools != FleetTools::Connected as i32 {
            return Err(ErrorCode::FleetToolsOff.err("the owner turned fleet tools off"));
        }
        Ok(principal)
    }

    /// The principal of a call: the ticket's, rechecked, or the owner's.
    pub(crate) async fn principal(
        &self,
        who: &Requester,
        need_tools: bool,
    ) -> Result<Principal, ClankieError> {
        match who {
            Requester::Fleet(ticket) => self.recheck(ticket, need_tools).await,
            Requester::Owner => Ok(Principal {
                fleet_id: "owner".into(),
                ..Default::default()
            }),
            // The grant again, at the last await: a revoke or the clock
            // since the request arrived refuses the call.
            Requester::Grant(g) => self
                .inner
                .grants
                .authenticate(&g.bearer)
                .map(|grant| grants::serve::principal(&grant)),
        }
    }

    pub(crate) fn ticket<T>(req: &Request<T>) -> Result<String, ClankieError> {
        clankie_runtime::grpc::ticket(req.metadata())
            .map(str::to_string)
            .ok_or_else(|| {
                ErrorCode::FleetCredentialRequired.err("the request carries no admission ticket")
            })
    }

    /// Dispatches one connected tool once. See the crate docs for the order
    /// of checks.
    pub async fn call(
        &self,
        ticket: &str,
        req: mcphost_pb::CallToolRequest,
        budget: Duration,
    ) -> Result<mcphost_pb::CallResult, ClankieError> {
        let who = Requester::Fleet(ticket.to_string());
        self.call_as(&who, req, budget, None, Default::default())
            .await
    }

    pub(crate) fn owner_request<T>(&self, msg: T, timeout: Duration) -> Request<T> {
        clankie_runtime::clients::Call::new(msg)
            .timeout(timeout)
            .owner(&self.inner.owner_token)
            .request()
    }

    pub(crate) fn replay(
        &self,
        existing: Record,
        who: &Requester,
        principal: &Principal,
        name: &str,
        ask: &crate::call::Ask,
    ) -> Result<mcphost_pb::CallResult, ClankieError> {
        // Another caller's id is taken, and that is all it learns.
        if existing.fleet != principal.fleet_id
            || !existing.belongs_to(&owner_of(who, principal), &audit_text(who, principal))
        {
            return Err(ErrorCode::ReceiptConflict.err("this receipt id is taken; choose a new id"));
        }
        if existing.journal != ask.journal {
            return Err(ErrorCode::ReceiptConflict.err(
                "this request id was written for another item, gesture, tracker or account scope; read it with `clankie work receipt` or choose a new id",
            ));
        }
        if existing.name != name || existing.arguments_sha256 != ask.args_sha {
            return Err(ErrorCode::ReceiptConflict.err(
                "this receipt id belongs to a different call; reconcile it with clankie_call({receiptId}) or choose a new id",
            ));
        }
        Ok(result_pb(&existing, true))
    }

    /// Reads a receipt for the principal that made the call; never
    /// dispatches. Anyone else hears `receipt_not_found`, exactly as for an
    /// id that was never used.
    pub async fn receipt(
        &self,
        who: &Requester,
        receipt_id: &str,
    ) -> Result<mcphost_pb::CallResult, ClankieError> {
        let principal = self.principal(who, false).await?;
        match self.inner.receipts.get(receipt_id) {
            Some(r)
                if r.fleet == principal.fleet_id
                    && r.belongs_to(&owner_of(who, &principal), &audit_text(who, &principal)) =>
            {
                Ok(result_pb(&r, true))
            }
            _ => {
                // A damaged store cannot say a receipt does not exist.
                self.inner.receipts.health()?;
                Err(ErrorCode::ReceiptNotFound.err("no receipt with this id for this caller"))
            }
        }
    }

    pub(crate) fn catalog_info(c: &Catalog) -> mcphost_pb::CatalogInfo {
        mcphost_pb::CatalogInfo {
            revision: c.revision,
            connected: c.connected.clone(),
            tool_count: c.len() as u32,
        }
    }

    /// The catalog a fleet request may see (refused while tools are off),
    /// and the tracker role it sees the vocabulary as.
    pub(crate) async fn fleet_catalog<T>(
        &self,
        req: &Request<T>,
    ) -> Result<(Arc<Catalog>, clankie_types::vocabulary::Role), ClankieError> {
        let ticket = Self::ticket(req)?;
        self.recheck(&ticket, true).await?;
        let role = self
            .tracker_caller(&Requester::Fleet(ticket), "")
            .await?
            .role;
        Ok((self.catalog(), role))
    }
}

impl clankie_runtime::main_kit::Served for McpHost {
    fn routes(&self) -> tonic::service::Routes {
        McpHost::routes(self)
    }

    fn readiness(&self) -> clankie_runtime::readiness::Readiness {
        McpHost::readiness(self)
    }

    async fn close(self) {
        McpHost::close(&self).await;
    }
}
