//! The shared language of the Clankie services.
//!
//! Pure data and rules, with no I/O: everything here depends on serde and
//! the wire types of `clankie-proto` only (and `uuid`, to mint receipt
//! ids), so a service can speak it without depending on another service.
//!
//! - [`fleet`]: the member-facing contract (receipt ids, outcomes, the
//!   call's account in `_meta`), with golden JSON in `fixtures/fleet/`.
//! - [`role`]: a caller's tracker role.
//! - [`vocabulary`]: the tracker's 61 Linear-compatible tools, their schemas
//!   and the role profiles (one file per tool family).
//! - [`peer`]: where a peer message stands.
//! - [`transcript`]: what a transcript entry is, whose words, which kind
//!   of conversation, what sent a wake.
//! - [`landing`]: where a review candidate stands, what a reviewer decides.
//! - [`host`]: an account's transport, a grant's standing, a tracker
//!   budget's class.
//! - [`hire`]: how a hire ended, whether its seat is ready.
//! - [`autonomy`]: the owner's saved global autonomy level.
//! - [`leads`]: which lead conversation owns a project.
//! - [`binding`]: a project's tracker binding and a fleet link's kind.
//! - [`helper`]: the census helper's pipe frames, their bounds and its
//!   refusal reasons.
//! - [`discovery`]: `gateway.json`, where a running gateway listens.
//! - [`log_level`]: MCP logging levels and their order.
//! - `closed_set!`: one declaration per closed set of words (enum, word,
//!   proto value).
//! - [`workspace`]: a remote workspace's normalized spelling.
//! - [`views`]: the JSON views of mailbox records that the gateway and the
//!   CLI show.

pub mod activation;
pub mod autonomy;
pub mod binding;
mod closed_set;
pub mod diagnostics;
pub mod discovery;
pub mod fleet;
pub mod helper;
pub mod hire;
pub mod host;
pub mod landing;
pub mod leads;
pub mod log_level;
pub mod peer;
pub mod role;
pub mod transcript;
pub mod views;
pub mod vocabulary;
pub mod workspace;

pub use binding::{FleetTools, LinkKind, TrackerBinding, TrackerRoute};
pub use peer::{PeerMessageState, PeerOutcome};
pub use role::Role;
