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
//! - [`vocabulary`]: the 61 Linear-compatible tools, their schemas and the
//!   role profiles. Always built; it needs no storage.
//! - [`store`] and [`tools`] (feature `store`, on by default): the SQLite
//!   store and the dispatcher that runs a tool against it; [`service`], the
//!   gRPC service the `clankie-tracker` binary serves on `run/tracker.sock`.

#[cfg(feature = "store")]
pub mod service;
#[cfg(feature = "store")]
pub mod store;
#[cfg(feature = "store")]
pub mod tools;
pub mod vocabulary;
