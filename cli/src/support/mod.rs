//! What every command shares: the owner's clients, terminal output, and the
//! gateway's discovery file.

pub mod clients;
pub mod discovery;
pub mod grant_file;
pub mod output;
pub mod pi;
