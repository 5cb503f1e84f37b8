//! `clankie-panes`: the multiplexers whose panes can be admitted, read and
//! acted on. One read trait, two hosts.
//!
//! - [`host`]: [`Pane`], [`PaneError`], the [`PaneHost`] read trait and
//!   [`ActError`].
//! - [`tmux`]: a tmux server (`tmux -S SOCKET`): reads through one
//!   control-mode client, acts as one `tmux` command each.
//! - [`herdr`]: a Herdr server's socket API, for reads and acts alike.
//! - [`map`]: a host's pane → shell map, kept from its event stream
//!   (`tmux/watch.rs`, `herdr/watch.rs`, both read by `events.rs`), so a
//!   proof whose shell it knows needs no pane read.
//!
//! Admission reads (and brackets every answer with kernel observations);
//! the mailbox acts. Neither trusts what a pane says about itself.

mod events;
pub mod herdr;
pub mod host;
pub mod map;
pub mod tmux;

pub use herdr::Herdr;
pub use host::{ActError, Listed, Pane, PaneError, PaneHost, READ_TIMEOUT};
pub use map::{Hit, PaneMap, Shell};
pub use tmux::Tmux;
