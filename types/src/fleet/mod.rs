//! The member-facing contract: what a fleet member (a harness's bridge, the
//! Pi extension, an MCP client) and the gateway say to each other, spelled
//! once for every crate that speaks it.
//!
//! - [`tool`]: the fleet tools, by the one name each goes by, and when each
//!   is served; [`args`]: what each takes.
//! - [`receipt`]: receipt ids, minted in one place, parsed by one rule.
//! - [`outcome`]: how a dispatched call ended, as the member reads it.
//! - [`delivery`]: who a seat's delivery is from, and whether it steers.
//! - [`seat`]: the seat routes, their bodies and their answers.
//! - [`error`]: a refusal's body, read by its fields, never its text.
//! - [`meta`]: the call's account in a result's `_meta`, one writer and one
//!   reader; [`catalog`]: the settings a tool catalog was served under.
//!
//! `types/fixtures/fleet/` holds a golden JSON file per type; the Rust
//! tests here and the Pi extension's node tests load the same files, so the
//! languages cannot drift apart.

pub mod args;
pub mod catalog;
pub mod delivery;
pub mod error;
pub mod limits;
pub mod meta;
pub mod outcome;
pub mod receipt;
pub mod seat;
pub mod tool;

pub use delivery::DeliveryKind;
pub use error::ErrorBody;
pub use meta::CallMeta;
pub use outcome::Outcome;
pub use receipt::{ReceiptId, ReceiptKind};
pub use tool::{Family, FleetTool};

#[cfg(test)]
pub(crate) fn fixture(name: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/fleet")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).expect("fixture")).expect("fixture is JSON")
}
