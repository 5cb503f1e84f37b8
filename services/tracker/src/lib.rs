//! The built-in tracker.
//!
//! Owns: the tracker database under `$CLANKIE_STATE/tracker/` (SQLite, WAL,
//! numbered migrations): teams with display keys, issues with workflow
//! states, comments, a change log every write appends to (the cursor behind
//! `list_changes`), write receipts for idempotency keys, and optimistic
//! concurrency through `ifUpdatedAt`.
//!
//! This first part is the store; the service, its Linear-compatible tools,
//! role profiles and budgets are built on it.

pub mod store;
