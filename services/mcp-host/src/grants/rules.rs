//! What a manual grant allows, checked on every call: exact top-level
//! argument pins, forbidden argument names, and the worker-publishing rule
//! (those tools need an exact `personaId` pin). Pure: no I/O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use clankie_runtime::{ClankieError, ErrorCode};

/// The longest a grant lives.
pub const MAX_TTL_SECONDS: u32 = 900;
/// How many tools one grant may name.
pub const MAX_TOOLS: usize = 64;

pub use clankie_types::vocabulary::worker_publishing;

/// One granted tool and its argument restrictions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantedTool {
    pub name: String,
    /// Exact top-level values; an argument left out is unrestricted.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub arguments: Map<String, Value>,
    /// Names whose presence refuses the call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden_arguments: Vec<String>,
}

impl GrantedTool {
    /// Refuses arguments the grant does not allow. Values compare as JSON
    /// values (so `1` and `1.0` differ only where JSON does).
    pub fn check(&self, args: &Value) -> Result<(), ClankieError> {
        let given = args.as_object().cloned().unwrap_or_default();
        for (name, pinned) in &self.arguments {
            match given.get(name) {
                Some(v) if v == pinned => {}
                Some(_) => {
                    return Err(ErrorCode::GrantArgumentMismatch.err(format!(
                        "this grant pins {name} of {} to another value",
                        self.name
                    )));
                }
                None => {
                    return Err(ErrorCode::GrantArgumentMismatch.err(format!(
                        "this grant pins {name} of {}; pass it with the granted value",
                        self.name
                    )));
                }
            }
        }
        if let Some(name) = self
            .forbidden_arguments
            .iter()
            .find(|n| given.contains_key(n.as_str()))
        {
            return Err(ErrorCode::GrantArgumentForbidden.err(format!(
                "this grant forbids the argument {name} of {}",
                self.name
            )));
        }
        Ok(())
    }

    /// A worker-publishing tool is granted only with an exact string
    /// `personaId`.
    pub fn pins_persona(&self) -> bool {
        self.arguments
            .get("personaId")
            .and_then(Value::as_str)
            .is_some_and(|p| !p.is_empty())
    }
}

/// Checks a request's shape before anything is stored: a principal, a
/// server, 1 to 64 distinct tools, a lifetime of 1 to 900 seconds.
pub fn check_request(
    principal_id: &str,
    server: &str,
    tools: &[GrantedTool],
    ttl_seconds: u32,
) -> Result<(), ClankieError> {
    let bad = |m: String| Err(ErrorCode::InvalidArgument.err(m));
    if principal_id.trim().is_empty() || principal_id.len() > 128 {
        return bad("principalId names who the grant is for (1 to 128 bytes)".into());
    }
    if principal_id.chars().any(char::is_control) {
        return bad("principalId has no control characters".into());
    }
    if server.is_empty() {
        return bad("server names one connected account".into());
    }
    if tools.is_empty() || tools.len() > MAX_TOOLS {
        return bad(format!("a grant names 1 to {MAX_TOOLS} tools"));
    }
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return bad("each tool appears once in a grant".into());
    }
    if ttl_seconds == 0 || ttl_seconds > MAX_TTL_SECONDS {
        return bad(format!(
            "ttlSeconds is 1 to {MAX_TTL_SECONDS}; a grant expires and is issued again"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(args: Value, forbidden: &[&str]) -> GrantedTool {
        GrantedTool {
            name: "echo".into(),
            arguments: args.as_object().cloned().unwrap_or_default(),
            forbidden_arguments: forbidden.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn pins_are_exact_and_omitted_arguments_are_free() {
        let t = tool(json!({"issueId": "ENG-1"}), &["parentId"]);
        assert!(t.check(&json!({"issueId": "ENG-1", "body": "hi"})).is_ok());
        let code = |a: Value| t.check(&a).expect_err("refused").code;
        assert_eq!(
            code(json!({"issueId": "ENG-2"})),
            ErrorCode::GrantArgumentMismatch
        );
        assert_eq!(
            code(json!({"body": "hi"})),
            ErrorCode::GrantArgumentMismatch
        );
        assert_eq!(
            code(json!({"issueId": ["ENG-1"]})),
            ErrorCode::GrantArgumentMismatch
        );
        assert_eq!(
            code(json!({"issueId": "ENG-1", "parentId": null})),
            ErrorCode::GrantArgumentForbidden
        );
        assert!(tool(json!({}), &[]).check(&json!({"anything": 1})).is_ok());
    }

    #[test]
    fn worker_publishing_needs_an_exact_persona() {
        assert!(worker_publishing("create_worker_comment"));
        assert!(worker_publishing("create_worker_issue"));
        assert!(!worker_publishing("save_comment"));
        assert!(tool(json!({"personaId": "p1"}), &[]).pins_persona());
        assert!(!tool(json!({"personaId": ""}), &[]).pins_persona());
        assert!(!tool(json!({"personaId": 7}), &[]).pins_persona());
        assert!(!tool(json!({}), &[]).pins_persona());
    }

    #[test]
    fn requests_are_bounded() {
        let one = vec![tool(json!({}), &[])];
        assert!(check_request("rev", "everything", &one, 900).is_ok());
        assert!(check_request("rev", "everything", &one, 901).is_err());
        assert!(check_request("rev", "everything", &one, 0).is_err());
        assert!(check_request("", "everything", &one, 60).is_err());
        assert!(check_request("rev", "", &one, 60).is_err());
        assert!(check_request("rev", "everything", &[], 60).is_err());
        let twice = vec![tool(json!({}), &[]), tool(json!({}), &[])];
        assert!(check_request("rev", "everything", &twice, 60).is_err());
    }
}
