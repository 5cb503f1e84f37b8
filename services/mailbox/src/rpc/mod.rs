//! The handlers, one file per domain; each is an `impl MailboxService`
//! block that `grpc.rs` delegates to.

pub(crate) mod callers;
pub(crate) mod conversations;
pub(crate) mod diagnostics;
pub(crate) mod harvests;
pub(crate) mod hires;
pub(crate) mod inbound;
pub(crate) mod lead_seat;
pub(crate) mod projects;
pub(crate) mod readiness;
pub(crate) mod reports;
pub(crate) mod retirement;
pub(crate) mod reviews;
pub(crate) mod seats;
pub(crate) mod wakes;

#[cfg(test)]
mod tests;
