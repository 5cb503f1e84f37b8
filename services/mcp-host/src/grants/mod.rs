//! Manual grants: a bearer for a few tools of one account, with exact
//! argument pins, forbidden arguments, at most 900 seconds of life, and a
//! durable revocation that aborts what has not dispatched yet.
//!
//! - `rules.rs`: what a grant allows (pure).
//! - `store.rs`: the book on disk and where each grant stands.
//! - `serve.rs`: issuing, who a bearer is, the granted tools by real name.
//! - here: [`Grants`], the book in memory with each active grant's abort
//!   token and the revocation feed the gateway closes sessions from.
//!
//! A grant is independent of the fleet: `fleet set --tools off` does not
//! touch it, and a grant session reaches only its own tools.

pub mod rules;
pub mod serve;
pub mod store;

use std::collections::HashMap;
use std::path::PathBuf;

use clankie_runtime::owner::{constant_time_eq, random_token, token_hash};
use clankie_runtime::state::{GuardError, Guarded};
use clankie_runtime::{ClankieError, ErrorCode, now_ms};
use parking_lot::Mutex;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use clankie_types::host::GrantStanding;
pub use rules::GrantedTool;
pub use store::{GrantRecord, GrantsFile, MANUAL, PROJECT};

/// The prefix of a grant bearer (a fleet bearer is `clkf_`).
pub const BEARER_PREFIX: &str = "clkg";

/// What an issue asks for.
pub struct Issue {
    pub principal_id: String,
    pub work_id: String,
    pub server: String,
    pub tools: Vec<GrantedTool>,
    pub ttl_seconds: u32,
    /// The account's stable identity now.
    pub account_identity: String,
}

/// The grant book and what goes with it in memory.
pub struct Grants {
    book: Mutex<Guarded<GrantsFile>>,
    /// One token per active grant: cancelled by its revocation, checked at
    /// the final dispatch boundary of every call under it.
    aborts: Mutex<HashMap<String, CancellationToken>>,
    revoked: broadcast::Sender<String>,
}

fn book_error(e: GuardError) -> ClankieError {
    match e {
        GuardError::Unreadable => ErrorCode::ServiceUnavailable.err(
            "the grant book cannot be read; no grant confers anything until the owner repairs it",
        ),
        GuardError::Write(e) => {
            ErrorCode::Internal.err(format!("the grant book could not be written: {e}"))
        }
    }
}

impl Grants {
    /// Opens `worker-grants/grants.json` (missing: an empty book).
    pub fn open(path: PathBuf) -> Grants {
        let book = Guarded::load(path, GrantsFile::default, GrantsFile::default);
        if let Some(problem) = book.unreadable() {
            tracing::warn!(problem, "grants.unreadable");
        }
        Grants {
            book: Mutex::new(book),
            aborts: Mutex::new(HashMap::new()),
            revoked: broadcast::channel(256).0,
        }
    }

    fn readable(&self) -> Result<(), ClankieError> {
        if self.book.lock().unreadable().is_some() {
            return Err(book_error(GuardError::Unreadable));
        }
        Ok(())
    }

    /// Issues a grant; durable before the bearer is returned.
    pub fn issue(&self, ask: Issue) -> Result<(GrantRecord, String), ClankieError> {
        rules::check_request(&ask.principal_id, &ask.server, &ask.tools, ask.ttl_seconds)?;
        let bearer = random_token(BEARER_PREFIX);
        let id = format!("grant-{}", &random_token("x")[2..18]);
        let mut record = GrantRecord::new(id, MANUAL, ask.server, ask.tools);
        record.principal_id = ask.principal_id;
        record.work_id = ask.work_id;
        record.expires_at_ms = record.issued_at_ms + i64::from(ask.ttl_seconds) * 1000;
        record.token_sha256 = token_hash(&bearer);
        record.account_identity = ask.account_identity;
        let stored = record.clone();
        self.book
            .lock()
            .update(|b| b.grants.push(stored))
            .map_err(book_error)?;
        Ok((record, bearer))
    }

    /// Keeps a legacy project-grant record: inspectable, no bearer, no
    /// authority.
    pub fn keep_project_record(
        &self,
        project: &str,
        server: &str,
        tools: Vec<GrantedTool>,
    ) -> Result<GrantRecord, ClankieError> {
        self.readable()?;
        let id = format!("project-{}", &random_token("x")[2..14]);
        let mut record = GrantRecord::new(id, PROJECT, server.into(), tools);
        record.project = project.into();
        let stored = record.clone();
        self.book
            .lock()
            .update(|b| b.grants.push(stored))
            .map_err(book_error)?;
        Ok(record)
    }

    pub fn list(&self) -> Result<Vec<GrantRecord>, ClankieError> {
        self.readable()?;
        Ok(self.book.lock().value().grants.clone())
    }

    /// Revokes a grant (or a retired record) for good, then aborts what
    /// has not dispatched under it and tells the gateway.
    pub fn revoke(&self, grant_id: &str) -> Result<GrantRecord, ClankieError> {
        let now = now_ms();
        let revoked = self
            .book
            .lock()
            .update(|b| {
                let g = b.grants.iter_mut().find(|g| g.grant_id == grant_id)?;
                if g.revoked_at_ms.is_none() {
                    g.revoked_at_ms = Some(now);
                }
                Some(g.clone())
            })
            .map_err(book_error)?
            .ok_or_else(|| ErrorCode::GrantNotFound.err(format!("no grant {grant_id}")))?;
        self.abort(grant_id);
        Ok(revoked)
    }

    /// Invalidates every active grant of `server` (its identity changed):
    /// durable, then aborted like a revocation.
    pub fn invalidate_account(&self, server: &str, why: &str) -> Result<usize, ClankieError> {
        let now = now_ms();
        let ids = self
            .book
            .lock()
            .update(|b| {
                let mut ids = Vec::new();
                for g in b.grants.iter_mut() {
                    if g.server == server && g.standing(now) == GrantStanding::Active {
                        g.invalidated = Some(why.into());
                        ids.push(g.grant_id.clone());
                    }
                }
                ids
            })
            .map_err(book_error)?;
        for id in &ids {
            self.abort(id);
        }
        Ok(ids.len())
    }

    fn abort(&self, grant_id: &str) {
        if let Some(token) = self.aborts.lock().remove(grant_id) {
            token.cancel();
        }
        let _ = self.revoked.send(grant_id.to_string());
    }

    /// The grant a bearer belongs to, while it is active.
    pub fn authenticate(&self, bearer: &str) -> Result<GrantRecord, ClankieError> {
        self.readable()?;
        let hash = token_hash(bearer);
        let found = self
            .book
            .lock()
            .value()
            .grants
            .iter()
            .find(|g| {
                !g.token_sha256.is_empty()
                    && constant_time_eq(g.token_sha256.as_bytes(), hash.as_bytes())
            })
            .cloned();
        let Some(grant) = found else {
            return Err(ErrorCode::GrantInvalid.err("this grant bearer is not known"));
        };
        match grant.standing(now_ms()) {
            GrantStanding::Active => Ok(grant),
            GrantStanding::Expired => Err(ErrorCode::GrantExpired.err(format!(
                "grant {} expired; ask the owner to issue a new one (grants are never renewed)",
                grant.grant_id
            ))),
            GrantStanding::Revoked => {
                Err(ErrorCode::GrantRevoked.err(format!("grant {} was revoked", grant.grant_id)))
            }
            GrantStanding::Invalidated => Err(ErrorCode::GrantRevoked.err(format!(
                "grant {} no longer holds: {}",
                grant.grant_id,
                grant.invalidated.as_deref().unwrap_or("invalidated")
            ))),
            GrantStanding::Retired => Err(ErrorCode::GrantInvalid
                .err("this record is kept for inspection and confers nothing")),
        }
    }

    /// The abort token of a grant's calls: cancelled by its revocation, and
    /// already cancelled when the grant no longer stands. The standing is
    /// read under the tokens' lock, so a revoke lands either before this
    /// read (a cancelled token) or on the token handed out.
    pub fn abort_token(&self, grant_id: &str) -> CancellationToken {
        let mut aborts = self.aborts.lock();
        let active = self
            .book
            .lock()
            .value()
            .grants
            .iter()
            .any(|g| g.grant_id == grant_id && g.standing(now_ms()) == GrantStanding::Active);
        if !active {
            let stopped = CancellationToken::new();
            stopped.cancel();
            return stopped;
        }
        aborts.entry(grant_id.to_string()).or_default().clone()
    }

    /// Revocations (and invalidations) as they happen, by grant id.
    pub fn revocations(&self) -> broadcast::Receiver<String> {
        self.revoked.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ask(ttl: u32) -> Issue {
        Issue {
            principal_id: "rev".into(),
            work_id: "ENG-1".into(),
            server: "everything".into(),
            tools: vec![GrantedTool {
                name: "echo".into(),
                arguments: json!({"message": "hi"}).as_object().cloned().expect("map"),
                forbidden_arguments: vec![],
            }],
            ttl_seconds: ttl,
            account_identity: "user-1".into(),
        }
    }

    #[test]
    fn a_revoked_grant_stays_revoked_after_reopen_and_aborts_its_calls() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("grants.json");
        let grants = Grants::open(path.clone());
        let (g, bearer) = grants.issue(ask(60)).expect("issue");
        assert!(bearer.starts_with("clkg_"));
        assert_eq!(
            grants.authenticate(&bearer).expect("active").grant_id,
            g.grant_id
        );
        let abort = grants.abort_token(&g.grant_id);
        let mut feed = grants.revocations();
        grants.revoke(&g.grant_id).expect("revoke");
        assert!(abort.is_cancelled());
        // A call that asks for its token after the revoke is stopped too.
        assert!(grants.abort_token(&g.grant_id).is_cancelled());
        assert_eq!(feed.try_recv().expect("told"), g.grant_id);
        let reopened = Grants::open(path.clone());
        let code = reopened.authenticate(&bearer).expect_err("revoked").code;
        assert_eq!(code, ErrorCode::GrantRevoked);
        let on_disk = std::fs::read_to_string(&path).expect("book");
        assert!(
            !on_disk.contains(&bearer),
            "only the bearer's hash is stored"
        );
        assert!(reopened.authenticate("clkg_nope").is_err());
    }

    #[test]
    fn a_changed_identity_invalidates_the_accounts_grants_only() {
        let dir = tempfile::tempdir().expect("tmp");
        let grants = Grants::open(dir.path().join("grants.json"));
        let (_, a) = grants.issue(ask(60)).expect("issue");
        let mut other = ask(60);
        other.server = "time".into();
        let (_, b) = grants.issue(other).expect("issue");
        assert_eq!(
            grants
                .invalidate_account("everything", "identity changed")
                .expect("ok"),
            1
        );
        assert_eq!(
            grants.authenticate(&a).expect_err("gone").code,
            ErrorCode::GrantRevoked
        );
        assert!(grants.authenticate(&b).is_ok());
    }

    #[test]
    fn an_unreadable_book_confers_nothing_and_is_never_saved_over() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("grants.json");
        std::fs::write(&path, b"{torn").expect("write");
        let grants = Grants::open(path.clone());
        assert_eq!(
            grants.issue(ask(60)).expect_err("refused").code,
            ErrorCode::ServiceUnavailable
        );
        assert!(grants.authenticate("clkg_x").is_err());
        assert!(grants.list().is_err());
        assert_eq!(std::fs::read(&path).expect("kept"), b"{torn");
    }
}
