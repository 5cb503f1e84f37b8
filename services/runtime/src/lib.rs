//! Shared plumbing for every Clankie process.
//!
//! Owns: where state lives and how it is written (atomic rename after fsync),
//! Unix-socket bind/connect, the tonic server recipe (trace spans with the
//! caller's trace context, tonic-health and reflection on every service,
//! drain on shutdown), the one reason-code table mapped to gRPC and HTTP, the
//! owner credential, and telemetry. It owns no business logic.

pub mod clients;
pub mod code;
pub mod grpc;
pub mod herdr;
pub mod limits;
pub mod listener;
pub mod main_kit;
pub mod owner;
pub mod paths;
pub mod peer;
pub mod principal;
pub mod readiness;
pub mod refuse;
pub mod sandbox;
pub mod service;
pub mod shutdown;
pub mod state;
pub mod telemetry;
pub mod uds;

pub use code::{ClankieError, ErrorCode};
pub use service::Service;

/// Milliseconds since the Unix epoch, for records and receipts.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
