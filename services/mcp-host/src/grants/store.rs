//! The grant book, `worker-grants/grants.json`: every manual grant with its
//! restrictions, lifetime and revocation, and the retired records (task-bound,
//! renewable, project and fleet grants) kept for inspection. Only the
//! bearer's SHA-256 is stored. Written by atomic rename after fsync; an
//! unreadable book is never saved over, and then no grant confers anything.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::rules::GrantedTool;
use clankie_types::host::GrantStanding;

/// The kind of a grant that confers authority; every other kind is a
/// retired record.
pub const MANUAL: &str = "manual";
/// A legacy project-grant record (inspect and revoke only).
pub const PROJECT: &str = "project";

fn manual() -> String {
    MANUAL.into()
}

/// One grant record, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRecord {
    pub grant_id: String,
    /// `manual` confers the grant; anything else (a task-bound or renewable
    /// grant from an older release, a project or fleet grant) is kept for
    /// inspection and confers nothing.
    #[serde(default = "manual")]
    pub kind: String,
    #[serde(default)]
    pub principal_id: String,
    /// Provenance only: which work the grant was issued for.
    #[serde(default)]
    pub work_id: String,
    /// The account the tools belong to.
    #[serde(default)]
    pub server: String,
    #[serde(default)]
    pub tools: Vec<GrantedTool>,
    /// Legacy project records: the project they were kept for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub project: String,
    #[serde(default)]
    pub issued_at_ms: i64,
    #[serde(default)]
    pub expires_at_ms: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token_sha256: String,
    /// The account's stable identity when the grant was issued; a changed
    /// identity invalidates the grant.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub account_identity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<i64>,
    /// Why the grant stopped conferring anything without a revoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidated: Option<String>,
    /// Fields of older records this release does not know, kept as written.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl GrantRecord {
    /// A record of `kind` for `tools` of `server`, issued now, with nothing
    /// else set.
    pub fn new(grant_id: String, kind: &str, server: String, tools: Vec<GrantedTool>) -> Self {
        GrantRecord {
            grant_id,
            kind: kind.into(),
            principal_id: String::new(),
            work_id: String::new(),
            server,
            tools,
            project: String::new(),
            issued_at_ms: clankie_runtime::now_ms(),
            expires_at_ms: 0,
            token_sha256: String::new(),
            account_identity: String::new(),
            revoked_at_ms: None,
            invalidated: None,
            other: Default::default(),
        }
    }

    pub fn standing(&self, now_ms: i64) -> GrantStanding {
        if self.kind != MANUAL {
            GrantStanding::Retired
        } else if self.revoked_at_ms.is_some() {
            GrantStanding::Revoked
        } else if self.invalidated.is_some() {
            GrantStanding::Invalidated
        } else if now_ms >= self.expires_at_ms {
            GrantStanding::Expired
        } else {
            GrantStanding::Active
        }
    }

    /// The audit principal of calls under this grant.
    pub fn audit_principal(&self) -> String {
        format!("grant:{}:principal:{}", self.grant_id, self.principal_id)
    }

    pub fn tool(&self, name: &str) -> Option<&GrantedTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// The whole book.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GrantsFile {
    #[serde(default)]
    pub version: u32,
    #[serde(default)]
    pub grants: Vec<GrantRecord>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Records from an older release (task-bound, renewable) load as
    /// inspectable, confer nothing, and keep every field on the next save.
    #[test]
    fn retired_records_load_confer_nothing_and_keep_their_fields() {
        let old = json!({"version": 1, "grants": [
            {"grantId": "g-task", "kind": "task-bound", "principalId": "w", "server": "linear",
             "taskId": "VUH-9", "renewable": true, "expiresAtMs": 9_999_999_999_999_i64},
            {"grantId": "g-old", "principalId": "w", "server": "linear", "expiresAtMs": 10}
        ]});
        let file: GrantsFile = serde_json::from_value(old).expect("loads");
        assert_eq!(file.grants[0].standing(0), GrantStanding::Retired);
        assert_eq!(file.grants[1].standing(5), GrantStanding::Active);
        assert_eq!(file.grants[1].standing(10), GrantStanding::Expired);
        let back = serde_json::to_value(&file).expect("writes");
        assert_eq!(back["grants"][0]["taskId"], "VUH-9");
        assert_eq!(back["grants"][0]["renewable"], true);
        assert_eq!(back["grants"][0]["kind"], "task-bound");
    }

    #[test]
    fn revocation_and_invalidation_outrank_the_clock() {
        let mut g: GrantRecord = serde_json::from_value(json!({
            "grantId": "g1", "principalId": "rev", "server": "s", "expiresAtMs": 100
        }))
        .expect("record");
        assert_eq!(g.audit_principal(), "grant:g1:principal:rev");
        g.invalidated = Some("the account's identity changed".into());
        assert_eq!(g.standing(0), GrantStanding::Invalidated);
        g.revoked_at_ms = Some(1);
        assert_eq!(g.standing(0), GrantStanding::Revoked);
    }
}
