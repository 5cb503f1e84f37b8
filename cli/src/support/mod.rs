//! What every command shares: the owner's clients, terminal output, exit
//! codes, the
//! gateway's discovery file, and the harness launchers (Pi, Claude Code,
//! Codex) with what they share.

pub mod activation;
pub mod claude;
pub mod clients;
pub mod codex;
pub mod discovery;
pub mod exit;
pub mod grant_file;
pub mod harness;
pub mod output;
pub mod pi;
pub mod supervisor;
