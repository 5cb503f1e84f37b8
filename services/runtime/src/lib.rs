//! Shared plumbing for every Clankie process.
//!
//! Owns: the table of the stack's services ([`service`]) and the shared main
//! ([`main_kit`]); where state lives and how it is written (atomic rename
//! after fsync, [`state::Guarded`]); Unix-socket bind/connect and the
//! accept-time caller check; the tonic recipe (trace spans with the caller's
//! trace context, tonic-health and reflection, drain on shutdown) and the
//! typed clients ([`clients`]); the one reason-code table mapped to gRPC and
//! HTTP ([`code`]) and the one refusal path ([`refuse`]); readiness, limits,
//! the owner credential, telemetry and the hire sandbox. It owns no business
//! logic: the shared language is in `clankie-types`. See `README.md` and
//! `docs/dev/recipe.md`.

pub mod authority;
pub mod blocking;
pub mod clients;
pub mod clock;
pub mod code;
pub mod grpc;
pub mod instance;
pub mod limits;
pub mod listener;
pub mod main_kit;
pub mod mcp_tap;
pub mod owner;
pub mod paths;
pub mod peer;
pub mod principal;
pub mod progress;
pub mod readiness;
pub mod refuse;
pub mod relay_tls;
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
