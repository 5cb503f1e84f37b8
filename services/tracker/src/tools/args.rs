//! Argument shapes of the read tools (writes use the store's input types).

use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Id {
    pub(super) id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Query {
    pub(super) query: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct QueryLimit {
    pub(super) query: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Limit {
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TeamFilter {
    pub(super) team: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TeamLimit {
    pub(super) team: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct GetIssue {
    pub(super) id: String,
    pub(super) include_relations: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListIssues {
    pub(super) team: Option<String>,
    pub(super) state: Option<String>,
    pub(super) assignee: Option<String>,
    pub(super) label: Option<String>,
    pub(super) project: Option<String>,
    pub(super) cycle: Option<String>,
    pub(super) parent_id: Option<String>,
    pub(super) query: Option<String>,
    pub(super) limit: Option<i64>,
    pub(super) cursor: Option<String>,
    pub(super) order_by: Option<String>,
    #[allow(dead_code)]
    pub(super) include_archived: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SearchIssues {
    pub(super) query: String,
    pub(super) team: Option<String>,
    pub(super) state: Option<String>,
    pub(super) limit: Option<i64>,
    pub(super) cursor: Option<String>,
    #[allow(dead_code)]
    pub(super) include_archived: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct IssueList {
    pub(super) issue_id: String,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CreateComment {
    pub(super) issue_id: String,
    pub(super) body: String,
    pub(super) idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListLabels {
    pub(super) team: Option<String>,
    pub(super) query: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CreateLabel {
    pub(super) name: String,
    pub(super) color: Option<String>,
    pub(super) description: Option<String>,
    pub(super) team_id: Option<String>,
    pub(super) idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListProjects {
    pub(super) team: Option<String>,
    pub(super) state: Option<String>,
    pub(super) query: Option<String>,
    pub(super) limit: Option<i64>,
    pub(super) cursor: Option<String>,
    #[allow(dead_code)]
    pub(super) include_archived: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct GetStatusUpdates {
    pub(super) project_id: Option<String>,
    pub(super) id: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListMilestones {
    pub(super) project: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListInitiatives {
    pub(super) query: Option<String>,
    pub(super) status: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListDocuments {
    pub(super) project: Option<String>,
    pub(super) issue_id: Option<String>,
    pub(super) query: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListCycles {
    pub(super) team_id: Option<String>,
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct GetReceipt {
    pub(super) idempotency_key: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListAudit {
    pub(super) actor: Option<String>,
    pub(super) cursor: Option<i64>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListChanges {
    pub(super) cursor: Option<i64>,
    pub(super) limit: Option<i64>,
    /// The service layer waits; the store only validates it.
    pub(super) wait_ms: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListIssueEvents {
    pub(super) issue_id: String,
    pub(super) stage: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListRuns {
    pub(super) issue_id: Option<String>,
    pub(super) status: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListReviews {
    pub(super) issue_id: Option<String>,
    pub(super) state: Option<String>,
    pub(super) limit: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ReviewArg {
    pub(super) review_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ListInbox {
    pub(super) include_resolved: Option<bool>,
    pub(super) limit: Option<i64>,
}
