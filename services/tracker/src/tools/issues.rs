//! Issues: issues, comments, statuses and labels.

use super::*;

pub(super) fn invoke(
    store: &mut Store,
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    let me = caller.actor.as_str();
    match tool {
        "get_issue" => {
            let a: GetIssue = parse(tool, args)?;
            let issue = store.issue(&a.id)?;
            if a.include_relations.unwrap_or(false) {
                let parent = match &issue.parent_id {
                    Some(p) => Some(store.issue(p)?),
                    None => None,
                };
                let children = store.children(&issue.id)?;
                Ok(json!({"issue": issue, "relations": {"parent": parent, "children": children}}))
            } else {
                Ok(json!({ "issue": issue }))
            }
        }
        "list_issues" => {
            let a: ListIssues = parse(tool, args)?;
            let q = IssueQuery {
                team: a.team,
                state: a.state,
                assignee: a.assignee,
                label: a.label,
                project: a.project,
                cycle: a.cycle,
                parent: a.parent_id,
                text: a.query,
                limit: a.limit,
                cursor: a.cursor,
                order_by_created: a.order_by.as_deref() == Some("createdAt"),
            };
            issues_page(store.query_issues(&q, me)?)
        }
        "search_issues" => {
            let a: SearchIssues = parse(tool, args)?;
            if a.query.trim().is_empty() {
                return Err(StoreError::Invalid("query is required".into()));
            }
            let q = IssueQuery {
                team: a.team,
                state: a.state,
                text: Some(a.query),
                limit: a.limit,
                cursor: a.cursor,
                ..Default::default()
            };
            issues_page(store.query_issues(&q, me)?)
        }
        "save_issue" => {
            let a: SaveIssue = parse(tool, args)?;
            written("issue", store.save_issue_as(caller, a)?)
        }
        "save_issue_status" => {
            let a: SaveIssueStatus = parse(tool, args)?;
            written("issue", store.save_issue_status(caller, a)?)
        }
        "list_comments" => {
            let a: IssueList = parse(tool, args)?;
            let mut comments = store.comments(&a.issue_id)?;
            comments.truncate(limit(a.limit));
            Ok(json!({ "comments": comments }))
        }
        "save_comment" => {
            let a: SaveComment = parse(tool, args)?;
            written("comment", store.save_comment_as(caller, tool, a)?)
        }
        "create_comment" => {
            let a: CreateComment = parse(tool, args)?;
            let input = SaveComment {
                issue_id: Some(a.issue_id),
                body: a.body,
                idempotency_key: a.idempotency_key,
                ..Default::default()
            };
            written("comment", store.save_comment_as(caller, tool, input)?)
        }
        "list_issue_statuses" => {
            let a: TeamFilter = parse(tool, args)?;
            if let Some(t) = &a.team {
                store.team(t)?;
            }
            let statuses: Vec<Value> = STATES
                .iter()
                .enumerate()
                .map(|(i, (name, kind))| json!({"name": name, "type": kind, "position": i}))
                .collect();
            Ok(json!({ "statuses": statuses }))
        }
        "list_issue_labels" => {
            let a: ListLabels = parse(tool, args)?;
            Ok(json!({"labels": store.labels(a.team.as_deref(), a.query.as_deref(), a.limit)?}))
        }
        "save_issue_label" => {
            let a: SaveLabel = parse(tool, args)?;
            written("label", store.save_label(caller, tool, a)?)
        }
        "create_issue_label" => {
            let a: CreateLabel = parse(tool, args)?;
            let input = SaveLabel {
                name: Some(a.name),
                color: a.color,
                description: a.description,
                team_id: a.team_id,
                idempotency_key: a.idempotency_key,
                ..Default::default()
            };
            written("label", store.save_label(caller, tool, input)?)
        }
        other => Err(no_implementation(other)),
    }
}
