//! Each fleet tool's arguments, as a member sends them. A field the tool
//! does not know refuses the call; the bounds are checked by the operation
//! that forwards them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `clankie_tools`: a search (`query`) or a description (`names`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsArgs {
    pub query: Option<String>,
    pub names: Option<Vec<String>>,
}

/// `clankie_call`: a call by name, or with a receipt id alone, the
/// reconciliation of an earlier one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CallArgs {
    pub name: Option<String>,
    pub arguments: Option<Value>,
    pub receipt_id: Option<String>,
    #[serde(default)]
    pub background: bool,
}

/// `message_clankie`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReportArgs {
    pub text: String,
    pub receipt_id: Option<String>,
}

/// `list_fleet_seats` and `get_wake`: no arguments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// `message_peer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PeerArgs {
    pub seat: String,
    pub text: String,
    pub receipt_id: Option<String>,
}

/// `review_candidate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CandidateArgs {
    pub candidate_id: String,
}

/// `review_verdict`, and the body of `POST …/review-verdicts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerdictArgs {
    pub candidate_id: String,
    pub patch_id: String,
    /// `approve` or `changes`.
    pub verdict: String,
    #[serde(default)]
    pub findings: Vec<Finding>,
    #[serde(default)]
    pub summary: String,
}

/// One concrete finding of a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Finding {
    pub text: String,
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub line: u32,
}

/// `schedule_wake`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScheduleWakeArgs {
    pub at_ms: i64,
    #[serde(default)]
    pub note: String,
}

/// The body of `POST …/review-candidates`: the change the bridge read from
/// the checkout `submit_for_review` named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Submission {
    pub checkout: String,
    pub head: String,
    pub base: String,
    pub patch_id: String,
    /// base64 of `git diff --binary BASE HEAD`.
    pub patch: String,
    pub summary: String,
    #[serde(default)]
    pub issue: String,
    #[serde(default)]
    pub evidence: String,
}
