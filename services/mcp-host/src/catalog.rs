//! The catalog of qualified tool names (`<account>_<tool>`) and its revision.
//!
//! A catalog is an immutable snapshot built from every verified account's
//! tool list; the host swaps in a new one when anything changes. Its revision
//! is a content hash of every definition and of the connected account set, so
//! it changes exactly when a definition is added, removed or changed, and
//! stays the same across restarts when nothing did.

use std::collections::{BTreeMap, HashMap};
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
        && name.len() <= clankie_runtime::limits::field::ACCOUNT_NAME
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
    /// Served by the host itself (the tracker vocabulary), not an upstream.
    pub builtin: bool,
    /// Hash of the definition, for the pre-dispatch configuration fence.
    pub definition_sha256: String,
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
            qualified,
            account: account.to_string(),
            tool: tool.to_string(),
            description: description.to_string(),
            schema,
            generation,
            builtin: false,
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
/// Worker-publishing tools (on any account) need an exact personaId grant,
/// so the fleet never sees them; a grant reaches them through
/// [`Catalog::grant_entry`].
#[derive(Debug, Clone, Default)]
pub struct Rules;

impl Rules {
    pub fn allows(&self, _account: &str, tool: &str) -> bool {
        !clankie_types::vocabulary::worker_publishing(tool)
    }
}

/// Where a search token was found.
const IN_NAME: u8 = 1;
const IN_TEXT: u8 = 2;

/// An inverted index over the words of names and descriptions, built once
/// per snapshot, so a query touches only the entries that match it.
#[derive(Default)]
struct Index {
    /// word → (entry position, IN_NAME | IN_TEXT)
    postings: HashMap<Box<str>, Vec<(u32, u8)>>,
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

impl Index {
    fn build(entries: &[Arc<Entry>]) -> Index {
        let mut postings: HashMap<Box<str>, Vec<(u32, u8)>> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            let mut mine: HashMap<String, u8> = HashMap::new();
            for w in words(&e.qualified) {
                *mine.entry(w).or_default() |= IN_NAME;
            }
            for w in words(&e.description) {
                *mine.entry(w).or_default() |= IN_TEXT;
            }
            for (w, flags) in mine {
                postings
                    .entry(w.into_boxed_str())
                    .or_default()
                    .push((i as u32, flags));
            }
        }
        Index { postings }
    }
}

/// An immutable catalog snapshot.
#[derive(Default)]
pub struct Catalog {
    pub revision: u64,
    /// Verified accounts, sorted.
    pub connected: Vec<String>,
    by_name: BTreeMap<String, Arc<Entry>>,
    /// Entries the rules keep from the fleet (worker publishing), which
    /// only a manual grant reaches.
    grant_only: BTreeMap<String, Arc<Entry>>,
    /// The same entries in name order, for the index's positions.
    ordered: Vec<Arc<Entry>>,
    index: Index,
}

/// One upstream tool: name, description and input schema.
pub type ToolDefinition = (String, String, Arc<serde_json::Map<String, Value>>);

/// One account's contribution to a catalog.
pub struct AccountTools {
    pub account: String,
    pub generation: u64,
    /// The host's own tools: they shadow an upstream's tools of the same
    /// qualified name (the tracker vocabulary over a connected Linear).
    pub builtin: bool,
    /// `(tool, description, input schema)` per tool.
    pub tools: Vec<ToolDefinition>,
}

impl Catalog {
    /// Builds a catalog from verified accounts, applying the rules.
    pub fn build(accounts: &[AccountTools], rules: &Rules) -> Catalog {
        let mut entries = BTreeMap::new();
        let mut grant_only = BTreeMap::new();
        let mut connected = Vec::new();
        let builtin_first = accounts
            .iter()
            .filter(|a| a.builtin)
            .chain(accounts.iter().filter(|a| !a.builtin));
        for a in builtin_first {
            connected.push(a.account.clone());
            for (tool, description, schema) in &a.tools {
                let mut e = Entry::new(&a.account, a.generation, tool, description, schema.clone());
                e.builtin = a.builtin;
                let book = if rules.allows(&a.account, tool) {
                    &mut entries
                } else {
                    &mut grant_only
                };
                book.entry(e.qualified.clone()).or_insert(Arc::new(e));
            }
        }
        connected.sort();
        connected.dedup();
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
        let ordered: Vec<Arc<Entry>> = entries.values().cloned().collect();
        Catalog {
            // Zero means "no revision known" to bridges; never produce it.
            revision: u64::from_be_bytes(rev).max(1),
            connected,
            index: Index::build(&ordered),
            ordered,
            by_name: entries,
            grant_only,
        }
    }

    pub fn len(&self) -> usize {
        self.ordered.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }

    pub fn get(&self, qualified: &str) -> Option<&Arc<Entry>> {
        self.by_name.get(qualified)
    }

    /// The entry of `tool` on `account` for a manual grant: the fleet's
    /// entries and the ones the rules keep from the fleet alike.
    pub fn grant_entry(&self, account: &str, tool: &str) -> Option<Arc<Entry>> {
        let qualified = format!("{account}_{tool}");
        self.by_name
            .get(&qualified)
            .or_else(|| self.grant_only.get(&qualified))
            .filter(|e| e.account == account && e.tool == tool)
            .cloned()
    }

    /// Resolves a qualified name for dispatch.
    pub fn resolve(&self, qualified: &str) -> Result<Arc<Entry>, ClankieError> {
        self.by_name.get(qualified).cloned().ok_or_else(|| {
            ErrorCode::UnknownTool.err(format!(
                "{qualified} is not in the current catalog; search with clankie_tools"
            ))
        })
    }

    /// Ranks entries against `query`; returns at most `limit` (<= 20) and the
    /// number that matched. An empty query returns the first page by name.
    ///
    /// Per query word, an entry scores the best of: a whole word of its name
    /// (6), part of a word of its name (4), a word or part of a word of its
    /// description (1). Entries matching every query word rank first; ties go
    /// by name.
    pub fn search(&self, query: &str, limit: usize) -> (Vec<Arc<Entry>>, usize) {
        self.search_visible(query, limit, |_| true)
    }

    /// [`Catalog::search`] over the entries `visible` keeps: hidden entries
    /// neither rank nor count.
    pub fn search_visible(
        &self,
        query: &str,
        limit: usize,
        visible: impl Fn(&Entry) -> bool,
    ) -> (Vec<Arc<Entry>>, usize) {
        let limit = limit.clamp(1, MAX_SEARCH);
        let mut terms: Vec<String> = words(query).take(16).collect();
        terms.dedup();
        if terms.is_empty() {
            let shown = self.ordered.iter().filter(|e| visible(e));
            let total = shown.clone().count();
            let page: Vec<_> = shown.take(limit).cloned().collect();
            return (page, total);
        }
        // (score, hits) per touched entry.
        let mut scores: HashMap<u32, (u32, u32)> = HashMap::new();
        for term in &terms {
            let mut best: HashMap<u32, u32> = HashMap::new();
            for (word, postings) in &self.index.postings {
                let exact = &**word == term.as_str();
                if !exact && !word.contains(term.as_str()) {
                    continue;
                }
                for &(i, flags) in postings {
                    let w = if flags & IN_NAME != 0 {
                        if exact { 6 } else { 4 }
                    } else {
                        1
                    };
                    let b = best.entry(i).or_default();
                    *b = (*b).max(w);
                }
            }
            for (i, w) in best {
                let s = scores.entry(i).or_default();
                s.0 += w;
                s.1 += 1;
            }
        }
        let all = terms.len() as u32;
        let mut ranked: Vec<(u32, u32)> = scores
            .into_iter()
            .filter(|(i, _)| visible(&self.ordered[*i as usize]))
            .map(|(i, (score, hits))| (score + if hits == all { 100 } else { 0 }, i))
            .collect();
        let matched = ranked.len();
        let cmp = |a: &(u32, u32), b: &(u32, u32)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, cmp);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(cmp);
        (
            ranked
                .into_iter()
                .map(|(_, i)| self.ordered[i as usize].clone())
                .collect(),
            matched,
        )
    }

    /// Returns at most 10 entries for `names`, omitting unavailable ones.
    pub fn describe(&self, names: &[String]) -> Vec<Arc<Entry>> {
        self.describe_visible(names, |_| true)
    }

    /// [`Catalog::describe`] over the entries `visible` keeps.
    pub fn describe_visible(
        &self,
        names: &[String],
        visible: impl Fn(&Entry) -> bool,
    ) -> Vec<Arc<Entry>> {
        let mut seen = std::collections::HashSet::new();
        names
            .iter()
            .filter(|n| seen.insert(n.as_str()))
            .filter_map(|n| self.by_name.get(n.as_str()).cloned())
            .filter(|e| visible(e))
            .take(MAX_DESCRIBE)
            .collect()
    }
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
                    builtin: false,
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
                    builtin: false,
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
            &Rules,
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
        assert!(c.grant_entry("linear", "create_worker_comment").is_some());
        assert!(c.grant_entry("linear", "get_issue").is_some());
        assert!(c.grant_entry("linear", "nothing").is_none());
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
                builtin: false,
                tools: vec![(
                    "convert_time".into(),
                    "changed".into(),
                    schema(json!({"type":"object"})),
                )],
            }],
            &Rules,
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
