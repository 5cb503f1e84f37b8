//! Connected accounts: real upstream MCP servers, verified and supervised.
//!
//! Each account has one supervisor task that owns its one connection (one
//! child process for stdio, one session for HTTP). Verification is: the
//! server initializes and lists its tools; its `serverInfo` is recorded as the
//! account's identity. A connection that dies is restarted with bounded
//! exponential backoff; calls never spawn servers. An upstream
//! `tools/list_changed` re-lists that account only. One failing account never
//! removes another's tools.

mod connection;
pub(crate) mod error_text;
mod stderr;
mod supervise;
mod transport;

pub use transport::Transport;

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::state::{self, GuardError, Guarded};
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use rmcp::service::{Peer, RoleClient};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::catalog::{AccountTools, Catalog, Rules};
use crate::relay::Relay;

use supervise::supervise;

/// How long one connection attempt (initialize + list) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Backoff between restarts: starts here, doubles, stops at [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(500);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection up this long resets the backoff.
pub const HEALTHY_PERIOD: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AccountConfig {
    name: String,
    transport: Transport,
    generation: u64,
    created_at_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct AccountsFile {
    version: u32,
    next_generation: u64,
    accounts: Vec<AccountConfig>,
}

/// The live state of one account.
#[derive(Debug, Clone)]
pub struct Live {
    pub state: mcphost_pb::AccountState,
    pub identity_name: String,
    pub identity_version: String,
    pub protocol_version: String,
    pub tools: Arc<Vec<rmcp::model::Tool>>,
    pub last_error: String,
    pub restarts: u32,
    pub verified_at_ms: i64,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            state: mcphost_pb::AccountState::Verifying,
            identity_name: String::new(),
            identity_version: String::new(),
            protocol_version: String::new(),
            tools: Arc::new(Vec::new()),
            last_error: String::new(),
            restarts: 0,
            verified_at_ms: 0,
        }
    }
}

/// One account: its configuration, live state and current connection.
pub struct Slot {
    config: AccountConfig,
    live: watch::Sender<Live>,
    peer: Mutex<Option<Peer<RoleClient>>>,
    cancel: CancellationToken,
    inflight: AtomicUsize,
    idle: Notify,
}

impl Slot {
    pub fn generation(&self) -> u64 {
        self.config.generation
    }

    fn to_pb(&self) -> mcphost_pb::Account {
        let live = self.live.borrow();
        mcphost_pb::Account {
            name: self.config.name.clone(),
            transport: self.config.transport.kind().wire(),
            target: self.config.transport.target(),
            state: live.state as i32,
            identity_name: live.identity_name.clone(),
            identity_version: live.identity_version.clone(),
            protocol_version: live.protocol_version.clone(),
            tool_count: live.tools.len() as u32,
            last_error: live.last_error.clone(),
            generation: self.config.generation,
            restarts: live.restarts,
            verified_at_ms: live.verified_at_ms,
            provider_identity: None,
        }
    }
}

/// Holds a slot's connection open while a dispatched call is in flight, so a
/// replaced or removed account lets already dispatched calls settle.
pub struct InflightGuard {
    slot: Arc<Slot>,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.slot.inflight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.slot.idle.notify_waiters();
        }
    }
}

struct Inner {
    /// `accounts.json`. Unreadable at start: no account is connected and
    /// changes are refused, so the file is never overwritten.
    file: Mutex<Guarded<AccountsFile>>,
    slots: Mutex<BTreeMap<String, Arc<Slot>>>,
    catalog: watch::Sender<Arc<Catalog>>,
    rules: Rules,
    shutdown: CancellationToken,
    /// What the upstreams say while calls run.
    relay: Arc<Relay>,
    /// Accounts from the file that have not had their first verdict
    /// (verified or unavailable) since start.
    first_verdicts: Mutex<std::collections::HashSet<String>>,
    /// Where each stdio account's stderr is logged (`NAME.log`).
    stderr_logs: PathBuf,
}

/// The account registry; cheap to clone.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}

/// Why a change to `accounts.json` was not kept.
fn unsaved(e: GuardError) -> ClankieError {
    ErrorCode::Internal.err(format!("could not save accounts: {e}"))
}

impl Registry {
    /// Loads `accounts.json` from `dir` and starts a supervisor per account;
    /// each stdio server's stderr is logged under `stderr_logs`.
    pub fn open(
        dir: PathBuf,
        stderr_logs: PathBuf,
        shutdown: CancellationToken,
    ) -> std::io::Result<Self> {
        state::private_dir(&dir)?;
        let path = dir.join("accounts.json");
        let file = Guarded::load(path, AccountsFile::default, AccountsFile::default);
        if let Some(e) = file.unreadable() {
            tracing::error!(error = %e, "accounts file unreadable; no account is connected and changes are refused");
        }
        let configs = file.accounts.clone();
        let (catalog, _) = watch::channel(Arc::new(Catalog::build(
            &[crate::tracker::builtin_tools()],
            &Rules,
        )));
        let registry = Registry {
            inner: Arc::new(Inner {
                file: Mutex::new(file),
                slots: Mutex::new(BTreeMap::new()),
                catalog,
                rules: Rules,
                shutdown,
                relay: Relay::new(),
                first_verdicts: Mutex::new(configs.iter().map(|a| a.name.clone()).collect()),
                stderr_logs,
            }),
        };
        for config in configs {
            registry.start(config);
        }
        Ok(registry)
    }

    /// Accounts that had their first verdict and are not verified now, by
    /// name and state.
    pub fn degraded(&self) -> Vec<mcphost_pb::DegradedAccount> {
        let waiting = lock(&self.inner.first_verdicts).clone();
        lock(&self.inner.slots)
            .values()
            .filter(|s| !waiting.contains(&s.config.name))
            .filter_map(|s| {
                let state = s.live.borrow().state;
                (state != mcphost_pb::AccountState::Verified).then(|| mcphost_pb::DegradedAccount {
                    name: s.config.name.clone(),
                    state: state as i32,
                })
            })
            .collect()
    }

    /// The account a qualified name would belong to (`<account>_<tool>`:
    /// the first `_` ends the account) when it is connected but not
    /// verified now.
    pub fn not_verified_owner_of(&self, qualified: &str) -> Option<String> {
        let (account, _) = qualified.split_once('_')?;
        let slot = lock(&self.inner.slots).get(account).cloned()?;
        let verified = slot.live.borrow().state == mcphost_pb::AccountState::Verified;
        (!verified).then(|| account.to_string())
    }

    /// Where a stdio account's stderr is logged.
    fn stderr_log(&self, account: &str) -> PathBuf {
        self.inner.stderr_logs.join(format!("{account}.log"))
    }

    /// Where upstream progress and log lines go.
    pub fn relay(&self) -> Arc<Relay> {
        self.inner.relay.clone()
    }

    /// True until every account from the file had its first verdict.
    pub fn loading(&self) -> bool {
        !lock(&self.inner.first_verdicts).is_empty()
    }

    /// True when accounts.json could not be read.
    pub fn unreadable(&self) -> bool {
        lock(&self.inner.file).unreadable().is_some()
    }

    fn first_verdict(&self, name: &str) {
        lock(&self.inner.first_verdicts).remove(name);
    }

    /// Subscribes to catalog snapshots.
    pub fn catalog(&self) -> watch::Receiver<Arc<Catalog>> {
        self.inner.catalog.subscribe()
    }

    /// Lists accounts.
    pub fn list(&self) -> Vec<mcphost_pb::Account> {
        lock(&self.inner.slots)
            .values()
            .map(|s| s.to_pb())
            .collect()
    }

    /// Adds or replaces an account and starts verifying it.
    pub async fn connect(
        &self,
        name: &str,
        transport: Transport,
        wait: Duration,
    ) -> Result<mcphost_pb::Account, ClankieError> {
        if !crate::catalog::valid_account_name(name) {
            return Err(ErrorCode::InvalidArgument.err(
                "account names use lowercase letters, digits and dashes (no underscore), at most 40",
            ));
        }
        self.refuse_if_unreadable()?;
        let config = lock(&self.inner.file)
            .update(|file| {
                file.version = 1;
                file.next_generation += 1;
                let config = AccountConfig {
                    name: name.to_string(),
                    transport,
                    generation: file.next_generation,
                    created_at_ms: now_ms(),
                };
                file.accounts.retain(|a| a.name != name);
                file.accounts.push(config.clone());
                config
            })
            .map_err(unsaved)?;
        tracing::info!(
            account = name,
            transport = %config.transport.kind(),
            "account connected"
        );
        let slot = self.start(config);
        if !wait.is_zero() {
            let mut rx = slot.live.subscribe();
            let _ = tokio::time::timeout(wait, async {
                loop {
                    if rx.borrow_and_update().state != mcphost_pb::AccountState::Verifying {
                        break;
                    }
                    if rx.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
        }
        Ok(slot.to_pb())
    }

    /// Removes an account; its in-flight calls may still settle.
    pub fn disconnect(&self, name: &str) -> Result<bool, ClankieError> {
        self.refuse_if_unreadable()?;
        self.first_verdict(name);
        {
            let mut file = lock(&self.inner.file);
            if !file.accounts.iter().any(|a| a.name == name) {
                return Ok(false);
            }
            file.update(|f| {
                f.version = 1;
                f.accounts.retain(|a| a.name != name);
            })
            .map_err(unsaved)?;
        }
        if let Some(old) = lock(&self.inner.slots).remove(name) {
            old.cancel.cancel();
        }
        self.rebuild();
        tracing::info!(account = name, "account disconnected");
        Ok(true)
    }

    fn refuse_if_unreadable(&self) -> Result<(), ClankieError> {
        match lock(&self.inner.file).unreadable() {
            Some(e) => Err(ErrorCode::Internal.err(format!(
                "accounts.json is unreadable ({e}); move it aside before changing accounts"
            ))),
            None => Ok(()),
        }
    }

    /// The identity `account` answered with when it is verified now (its
    /// server's name until a provider identity is recorded).
    pub fn verified_identity(&self, account: &str) -> Option<String> {
        let slot = lock(&self.inner.slots).get(account).cloned()?;
        let live = slot.live.borrow();
        (live.state == mcphost_pb::AccountState::Verified).then(|| live.identity_name.clone())
    }

    /// The generation of `account` when it is connected and verified now.
    pub fn verified_generation(&self, account: &str) -> Option<u64> {
        let slot = lock(&self.inner.slots).get(account).cloned()?;
        (slot.live.borrow().state == mcphost_pb::AccountState::Verified)
            .then_some(slot.config.generation)
    }

    /// Whether `account` is verified now and its server lists every one of
    /// `tools`.
    pub fn offers(&self, account: &str, tools: &[&str]) -> bool {
        let Some(slot) = lock(&self.inner.slots).get(account).cloned() else {
            return false;
        };
        let live = slot.live.borrow();
        live.state == mcphost_pb::AccountState::Verified
            && tools
                .iter()
                .all(|t| live.tools.iter().any(|have| have.name == *t))
    }

    /// The connection for `account` at `generation`, held open while the
    /// guard lives. Refuses when the account changed or is not verified.
    pub fn dispatch_handle(
        &self,
        account: &str,
        generation: u64,
    ) -> Result<(Peer<RoleClient>, InflightGuard), ClankieError> {
        let slot = lock(&self.inner.slots)
            .get(account)
            .cloned()
            .ok_or_else(|| {
                ErrorCode::AccountChanged.err(format!("account {account} was disconnected"))
            })?;
        if slot.config.generation != generation {
            return Err(ErrorCode::AccountChanged.err(format!(
                "account {account} was reconfigured; search again with clankie_tools"
            )));
        }
        if slot.live.borrow().state != mcphost_pb::AccountState::Verified {
            return Err(ErrorCode::AccountUnavailable.err(format!(
                "account {account} is not verified right now; retry shortly"
            )));
        }
        let peer = lock(&slot.peer).clone().ok_or_else(|| {
            ErrorCode::AccountUnavailable.err(format!("account {account} has no live connection"))
        })?;
        slot.inflight.fetch_add(1, Ordering::AcqRel);
        Ok((peer, InflightGuard { slot }))
    }

    fn start(&self, config: AccountConfig) -> Arc<Slot> {
        let (live, _) = watch::channel(Live::default());
        let slot = Arc::new(Slot {
            config: config.clone(),
            live,
            peer: Mutex::new(None),
            cancel: self.inner.shutdown.child_token(),
            inflight: AtomicUsize::new(0),
            idle: Notify::new(),
        });
        if let Some(old) = lock(&self.inner.slots).insert(config.name.clone(), slot.clone()) {
            old.cancel.cancel();
        }
        self.rebuild();
        tokio::spawn(supervise(self.clone(), slot.clone()));
        slot
    }

    /// Rebuilds the catalog from every verified account.
    fn rebuild(&self) {
        let accounts: Vec<AccountTools> = std::iter::once(crate::tracker::builtin_tools())
            .chain(lock(&self.inner.slots).values().filter_map(|s| {
                let live = s.live.borrow();
                (live.state == mcphost_pb::AccountState::Verified).then(|| AccountTools {
                    account: s.config.name.clone(),
                    generation: s.config.generation,
                    builtin: false,
                    tools: live
                        .tools
                        .iter()
                        .map(|t| {
                            (
                                t.name.to_string(),
                                t.description.as_deref().unwrap_or("").to_string(),
                                t.input_schema.clone(),
                            )
                        })
                        .collect(),
                })
            }))
            .collect();
        let next = Catalog::build(&accounts, &self.inner.rules);
        self.inner.catalog.send_if_modified(|cur| {
            if cur.revision == next.revision && cur.len() == next.len() {
                false
            } else {
                *cur = Arc::new(next);
                true
            }
        });
    }

    /// Waits until every supervisor has closed its connection.
    pub async fn close(&self) {
        let slots: Vec<Arc<Slot>> = lock(&self.inner.slots).values().cloned().collect();
        for s in &slots {
            s.cancel.cancel();
        }
        for s in slots {
            let _ = tokio::time::timeout(Duration::from_secs(3), async {
                while lock(&s.peer).is_some() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await;
        }
    }
}
