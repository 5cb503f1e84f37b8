//! The built-in tracker.
//!
//! Owns: the tracker database under `$CLANKIE_STATE/tracker/` (SQLite, WAL,
//! numbered migrations): teams with display keys (and teams cut over from
//! Linear, whose imported issues keep their Linear identifiers), issues with
//! workflow states, comments, projects, the work loop (events, evidence,
//! asks, leases, runs), guided reviews, the lead's inbox, a change log every
//! write appends to (the cursor behind `list_changes`), an audit log of
//! writes, write receipts for idempotency keys, and optimistic concurrency
//! through `ifUpdatedAt`.
//!
//! - [`store`]: the SQLite store, by concern (schema, writes, issues,
//!   history, planning, the work loop, reviews, identity).
//! - [`tools`]: the dispatcher that runs one vocabulary tool against it.
//! - [`service`]: the gRPC service the `clankie-tracker` binary serves on
//!   `run/tracker.sock`, with its long poll.
//! - [`vocabulary`]: the 61 Linear-compatible tools and role profiles, from
//!   `clankie-types`, where the mcp-host reads them too.

mod commits;
mod retire;
pub mod service;
pub mod store;
pub mod tools;

pub use clankie_types::vocabulary;
