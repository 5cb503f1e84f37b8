//! Who a connected account really is: the provider's stable user and
//! workspace ids (with email and workspace name when it has them), read by
//! verification through the account's own MCP connection and kept in
//! `mcp-host/identities.json`. A server naming itself at initialize is not
//! an identity; this is. A changed identity invalidates the account's
//! manual grants; an unchanged one keeps them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clankie_runtime::state::{GuardError, Guarded};
use clankie_runtime::{ClankieError, ErrorCode};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One account's recorded identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub user_id: String,
    pub workspace_id: String,
    #[serde(default)]
    pub email: String,
    #[serde(default)]
    pub workspace_name: String,
    pub verified_at_ms: i64,
}

impl Identity {
    /// What must stay the same for the account's grants to hold.
    pub fn stable(&self) -> String {
        format!("user:{}/workspace:{}", self.user_id, self.workspace_id)
    }

    /// Reads `get_user {query: "me"}` and `get_workspace` answers: the ids
    /// at the top level or under `user` / `workspace`. No id, no identity.
    pub fn from_answers(user: &Value, workspace: &Value, now_ms: i64) -> Result<Identity, String> {
        let pick = |v: &Value, inner: &str, key: &str| -> String {
            v.get(inner)
                .and_then(|x| x.get(key))
                .or_else(|| v.get(key))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let user_id = pick(user, "user", "id");
        let workspace_id = pick(workspace, "workspace", "id");
        if user_id.is_empty() || workspace_id.is_empty() {
            return Err("the provider named no stable user or workspace id".into());
        }
        Ok(Identity {
            user_id,
            workspace_id,
            email: pick(user, "user", "email"),
            workspace_name: pick(workspace, "workspace", "name"),
            verified_at_ms: now_ms,
        })
    }
}

/// What a verification found against the recorded identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    First,
    Same,
    Changed,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::First => "first",
            Change::Same => "same",
            Change::Changed => "changed",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct IdentitiesFile {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    accounts: BTreeMap<String, Identity>,
}

/// The identity book.
pub struct Identities {
    book: Mutex<Guarded<IdentitiesFile>>,
}

impl Identities {
    pub fn open(path: PathBuf) -> Identities {
        let book = Guarded::load(path, IdentitiesFile::default, IdentitiesFile::default);
        if let Some(problem) = book.unreadable() {
            tracing::warn!(problem, "identities.unreadable");
        }
        Identities {
            book: Mutex::new(book),
        }
    }

    pub fn get(&self, account: &str) -> Option<Identity> {
        self.book.lock().value().accounts.get(account).cloned()
    }

    /// Records a verified identity (durable before it counts) and says how
    /// it compares with the one recorded before.
    pub fn record(&self, account: &str, identity: Identity) -> Result<Change, ClankieError> {
        self.book
            .lock()
            .update(|b| {
                let change = match b.accounts.get(account) {
                    None => Change::First,
                    Some(old) if old.stable() == identity.stable() => Change::Same,
                    Some(_) => Change::Changed,
                };
                b.accounts.insert(account.to_string(), identity);
                change
            })
            .map_err(|e| match e {
                GuardError::Unreadable => ErrorCode::ServiceUnavailable
                    .err("the identity book cannot be read; verification changes nothing until it is repaired"),
                GuardError::Write(e) => {
                    ErrorCode::Internal.err(format!("the identity book could not be written: {e}"))
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ids_are_required_and_read_where_providers_put_them() {
        let user = json!({"id": "u1", "email": "a@b.c"});
        let ws = json!({"workspace": {"id": "w1", "name": "Acme"}});
        let id = Identity::from_answers(&user, &ws, 5).expect("identity");
        assert_eq!(id.stable(), "user:u1/workspace:w1");
        assert_eq!(
            (id.email.as_str(), id.workspace_name.as_str()),
            ("a@b.c", "Acme")
        );
        assert!(Identity::from_answers(&json!({"name": "x"}), &ws, 5).is_err());
        assert!(Identity::from_answers(&user, &json!({}), 5).is_err());
    }

    #[test]
    fn a_recorded_identity_compares_by_its_stable_ids() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("identities.json");
        let book = Identities::open(path.clone());
        let id = |u: &str, email: &str| Identity {
            user_id: u.into(),
            workspace_id: "w1".into(),
            email: email.into(),
            workspace_name: String::new(),
            verified_at_ms: 1,
        };
        assert_eq!(
            book.record("linear", id("u1", "a")).expect("first"),
            Change::First
        );
        assert_eq!(
            book.record("linear", id("u1", "b")).expect("same"),
            Change::Same
        );
        assert_eq!(
            Identities::open(path).get("linear").expect("kept").email,
            "b"
        );
        assert_eq!(
            book.record("linear", id("u2", "b")).expect("changed"),
            Change::Changed
        );
    }
}
