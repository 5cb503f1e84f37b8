//! What every pane host answers: one pane as its host reports it, the fixed
//! reasons a host cannot answer, and the read trait admission uses.
//!
//! What a pane host reports is a claim to be bracketed by kernel
//! observations; environment hints inside panes (`HERDR_PANE_ID`,
//! `TMUX_PANE`) are never trusted.

use std::time::Duration;

/// How long one pane-host read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// One pane as its host reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    pub pane_id: String,
    pub session: String,
    pub shell_pid: i32,
    /// The window holding the pane (tmux's `@N`; Herdr's workspace).
    pub window: String,
    pub command: String,
}

/// Why a pane host could not answer. Fixed vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneError {
    /// The host answered that the pane does not exist.
    NotFound,
    /// The host could not be reached or answered nonsense.
    Unavailable(&'static str),
}

/// A multiplexer that can name a pane's shell.
pub trait PaneHost: Send + Sync {
    /// Reads one pane fresh.
    fn pane(
        &self,
        pane_id: &str,
    ) -> impl std::future::Future<Output = Result<Pane, PaneError>> + Send;
    /// Reads every pane of the linked session fresh.
    fn panes(&self) -> impl std::future::Future<Output = Result<Vec<Pane>, PaneError>> + Send;
}

/// A live pane as its host lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub pane_id: String,
    /// The host says the agent in it finished its work (Herdr's `done`).
    /// tmux has no such word: its hired panes close when the agent exits.
    pub agent_done: bool,
}

/// Why a pane host could not act (open, close or list a hire's pane): the
/// host's own words, for the hire's refusal.
#[derive(Debug)]
pub struct ActError(pub String);
