//! The catalog of qualified tool names (`<account>_<tool>`) and its revision.
//!
//! A catalog is an immutable snapshot built from every verified account's
//! tool list; the host swaps in a new one when anything changes. Its revision
//! is a content hash of every definition and of the connected account set, so
//! it changes exactly when a definition is added, removed or changed, and
//! stays the same across restarts when nothing did.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use clankie_runtime::{ClankieError, ErrorCode};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// At most this many names come back from a search.
pub const MAX_SEARCH: usize = 20;
/// At most this many schemas come back from a describe.
pub const MAX_DESCRIBE: usize = 10;

/// Account names: lowercase letters, digits and dashes (no underscore, so the
/// first `_` of a qualified name always ends the account).
pub fn valid_account_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 40
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// One upstream tool as the host advertises it.
pub struct Entry {
    pub qualified: String,
    pub account: String,
    pub tool: String,
    pub description: String,
    pub schema: Arc<serde_json::Map<String, Value>>,
    pub generation: u64,
    /// Hash of the definition, for the pre-dispatch configuration fence.
    pub definition_sha256: String,
    search_name: String,
    search_text: String,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl Entry {
    pub fn new(
        account: &str,
        generation: u64,
        tool: &str,
        description: &str,
        schema: Arc<serde_json::Map<String, Value>>,
    ) -> Self {
        let qualified = format!("{account}_{tool}");
        let mut h = Sha256::new();
        h.update(qualified.as_bytes());
        h.update([0]);
        h.update(description.as_bytes());
        h.update([0]);
        h.update(serde_json::to_vec(&*schema).unwrap_or_default());
        Entry {
            search_name: qualified.to_lowercase(),
            search_text: description.to_lowercase(),
            qualified,
            account: account.to_string(),
            tool: tool.to_string(),
            description: description.to_string(),
            schema,
            generation,
            definition_sha256: hex::encode(h.finalize()),
            validator: OnceLock::new(),
        }
    }

    /// The first line of the description, bounded.
    pub fn one_line(&self) -> String {
        let line = self.description.lines().next().unwrap_or("").trim();
        if line.chars().count() > 160 {
            let mut s: String = line.chars().take(157).collect();
            s.push_str("...");
            s
        } else {
            line.to_string()
        }
    }

    /// Validates arguments against the advertised input schema.
    pub fn validate(&self, args: &Value) -> Result<(), ClankieError> {
        let compiled = self.validator.get_or_init(|| {
            jsonschema::validator_for(&Value::Object((*self.schema).clone()))
                .map_err(|e| e.to_string())
        });
        let validator = match compiled {
            Ok(v) => v,
            // An upstream schema we cannot compile is not enforced locally;
            // the upstream still validates its own input.
            Err(_) => return Ok(()),
        };
        let problems: Vec<String> = validator
            .iter_errors(args)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ErrorCode::ArgumentsInvalid.err(format!(
                "arguments for {} do not match its input schema: {}",
                self.qualified,
                problems.join("; ")
            )))
        }
    }
}

/// The rule matcher: which upstream tools a fleet principal may reach.
#[derive(Debug, Clone)]
pub struct Rules {
    /// `(account, tool)` pairs never offered to the fleet.
    excluded: Vec<(String, String)>,
}

impl Default for Rules {
    fn default() -> Self {
        // Linear worker-publishing tools need an exact personaId grant.
        Rules {
            excluded: vec![
                ("linear".into(), "create_worker_comment".into()),
                ("linear".into(), "create_worker_issue".into()),
            ],
        }
    }
}

impl Rules {
    pub fn allows(&self, account: &str, tool: &str) -> bool {
        !self.excluded.iter().any(|(a, t)| a == account && t == tool)
    }
}

/// An immutable catalog snapshot.
#[derive(Default)]
pub struct Catalog {
    pub revision: u64,
    /// Verified accounts, sorted.
    pub connected: Vec<String>,
    entries: BTreeMap<String, Arc<Entry>>,
}

/// One account's contribution to a catalog.
pub struct AccountTools {
    pub account: String,
    pub generation: u64,
    pub tools: Vec<(String, String, Arc<serde_json::Map<String, Value>>)>,
}

impl Catalog {
    /// Builds a catalog from verified accounts, applying the rules.
    pub fn build(accounts: &[AccountTools], rules: &Rules) -> Catalog {
        let mut entries = BTreeMap::new();
        let mut connected = Vec::new();
        for a in accounts {
            connected.push(a.account.clone());
            for (tool, description, schema) in &a.tools {
                if !rules.allows(&a.account, tool) {
                    continue;
                }
                let e = Entry::new(&a.account, a.generation, tool, description, schema.clone());
                entries.insert(e.qualified.clone(), Arc::new(e));
            }
        }
        connected.sort();
        let mut h = Sha256::new();
        for name in &connected {
            h.update(b"account\0");
            h.update(name.as_bytes());
            h.update([0]);
        }
        for e in entries.values() {
            h.update(e.definition_sha256.as_bytes());
        }
        let digest = h.finalize();
        let mut rev = [0u8; 8];
        rev.copy_from_slice(&digest[..8]);
        Catalog {
            // Zero means "no revision known" to bridges; never produce it.
            revision: u64::from_be_bytes(rev).max(1),
            connected,
            entries,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, qualified: &str) -> Option<&Arc<Entry>> {
        self.entries.get(qualified)
    }

    /// Resolves a qualified name for dispatch.
    pub fn resolve(&self, qualified: &str) -> Result<Arc<Entry>, ClankieError> {
        self.entries.get(qualified).cloned().ok_or_else(|| {
            ErrorCode::UnknownTool.err(format!(
                "{qualified} is not in the current catalog; search with clankie_tools"
            ))
        })
    }

    /// Ranks entries against `query`; returns at most `limit` (<= 20) and the
    /// number that matched. An empty query returns the first page by name.
    pub fn search(&self, query: &str, limit: usize) -> (Vec<Arc<Entry>>, usize) {
        let limit = limit.clamp(1, MAX_SEARCH);
        let terms: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
            .map(|t| t.to_lowercase())
            .take(16)
            .collect();
        if terms.is_empty() {
            let page: Vec<_> = self.entries.values().take(limit).cloned().collect();
            return (page, self.entries.len());
        }
        // Keep the best `limit` in a small sorted buffer: O(n log limit).
        let mut best: Vec<(u32, &Arc<Entry>)> = Vec::with_capacity(limit + 1);
        let mut matched = 0usize;
        for e in self.entries.values() {
            let score = score(e, &terms);
            if score == 0 {
                continue;
            }
            matched += 1;
            if best.len() == limit && best.last().is_some_and(|(s, _)| *s >= score) {
                continue;
            }
            let pos = best.partition_point(|(s, _)| *s >= score);
            best.insert(pos, (score, e));
            best.truncate(limit);
        }
        (best.into_iter().map(|(_, e)| e.clone()).collect(), matched)
    }

    /// Returns at most 10 entries for `names`, omitting unavailable ones.
    pub fn describe(&self, names: &[String]) -> Vec<Arc<Entry>> {
        let mut seen = std::collections::HashSet::new();
        names
            .iter()
            .filter(|n| seen.insert(n.as_str()))
            .filter_map(|n| self.entries.get(n.as_str()).cloned())
            .take(MAX_DESCRIBE)
            .collect()
    }
}

fn score(e: &Entry, terms: &[String]) -> u32 {
    let mut total = 0;
    let mut hits = 0;
    for t in terms {
        let in_name = e
            .search_name
            .split('_')
            .any(|part| part == t.as_str() || part.split('-').any(|p| p == t.as_str()));
        let s = if in_name {
            6
        } else if e.search_name.contains(t.as_str()) {
            4
        } else if e.search_text.contains(t.as_str()) {
            1
        } else {
            0
        };
        if s > 0 {
            hits += 1;
        }
        total += s;
    }
    if hits == 0 {
        return 0;
    }
    // Entries matching every term rank above any partial match.
    total + if hits == terms.len() { 100 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
        Arc::new(v.as_object().cloned().unwrap_or_default())
    }

    fn sample() -> Catalog {
        Catalog::build(
            &[
                AccountTools {
                    account: "time".into(),
                    generation: 1,
                    tools: vec![
                        (
                            "get_current_time".into(),
                            "Get current time in a specific timezone".into(),
                            schema(
                                json!({"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}),
                            ),
                        ),
                        (
                            "convert_time".into(),
                            "Convert time between timezones".into(),
                            schema(json!({"type":"object"})),
                        ),
                    ],
                },
                AccountTools {
                    account: "linear".into(),
                    generation: 1,
                    tools: vec![
                        (
                            "get_issue".into(),
                            "Read an issue".into(),
                            schema(json!({"type":"object"})),
                        ),
                        (
                            "create_worker_comment".into(),
                            "Publish as a persona".into(),
                            schema(json!({"type":"object"})),
                        ),
                    ],
                },
            ],
            &Rules::default(),
        )
    }

    #[test]
    fn search_ranks_full_matches_first_and_is_bounded() {
        let c = sample();
        let (hits, _) = c.search("linear get issue", 20);
        assert_eq!(hits[0].qualified, "linear_get_issue");
        let (hits, _) = c.search("timezone", 20);
        assert!(hits.iter().all(|e| e.account == "time"));
        let (page, total) = c.search("", 1);
        assert_eq!(page.len(), 1);
        assert_eq!(total, 3);
    }

    #[test]
    fn rules_exclude_worker_publishing() {
        let c = sample();
        assert!(c.get("linear_create_worker_comment").is_none());
        assert_eq!(
            c.resolve("linear_create_worker_comment")
                .err()
                .map(|e| e.code),
            Some(ErrorCode::UnknownTool)
        );
    }

    #[test]
    fn revision_tracks_definitions_only() {
        let a = sample();
        let b = sample();
        assert_eq!(a.revision, b.revision);
        let c = Catalog::build(
            &[AccountTools {
                account: "time".into(),
                generation: 2,
                tools: vec![(
                    "convert_time".into(),
                    "changed".into(),
                    schema(json!({"type":"object"})),
                )],
            }],
            &Rules::default(),
        );
        assert_ne!(a.revision, c.revision);
    }

    #[test]
    fn validation_reports_schema_problems() {
        let c = sample();
        let e = c.resolve("time_get_current_time").expect("entry");
        e.validate(&json!({"timezone": "UTC"})).expect("valid");
        let err = e.validate(&json!({"timezone": 5})).expect_err("invalid");
        assert_eq!(err.code, ErrorCode::ArgumentsInvalid);
        assert!(err.message.contains("timezone"), "{}", err.message);
        assert!(e.validate(&json!({})).is_err());
    }

    #[test]
    fn describe_is_bounded_and_omits_unknown() {
        let c = sample();
        let names: Vec<String> = std::iter::repeat_n("time_convert_time".to_string(), 30)
            .chain(["nope_tool".to_string()])
            .collect();
        assert_eq!(c.describe(&names).len(), 1);
    }

    #[test]
    fn account_names_exclude_underscore() {
        assert!(valid_account_name("time"));
        assert!(valid_account_name("server-everything"));
        assert!(!valid_account_name("my_time"));
        assert!(!valid_account_name(""));
        assert!(!valid_account_name("-x"));
    }
}
