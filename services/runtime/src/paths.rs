//! Where Clankie keeps its state and sockets.
//!
//! Everything lives under one state directory: `$CLANKIE_STATE`, or
//! `~/.clankie` by default. Sockets live in its `run/` folder (0700).

use std::path::{Path, PathBuf};

/// The resolved layout of one state directory.
#[derive(Debug, Clone)]
pub struct StatePaths {
    root: PathBuf,
}

impl StatePaths {
    /// Resolves `$CLANKIE_STATE`, else `$HOME/.clankie`.
    pub fn from_env() -> Self {
        let root = std::env::var_os("CLANKIE_STATE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME").unwrap_or_else(|| "/".into());
                PathBuf::from(home).join(".clankie")
            });
        Self::new(root)
    }

    pub fn new(root: impl Into<PathBuf>) -> Self {
        StatePaths { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The socket directory.
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    /// The gRPC socket of a service (`admission`, `mcp-host`).
    pub fn socket(&self, service: &str) -> PathBuf {
        self.run_dir().join(format!("{service}.sock"))
    }

    /// The folder of what fleet members need: the gateway's local MCP
    /// socket and its discovery file, and nothing else. A sandboxed hire
    /// sees this folder (read-only) and no other part of the state folder;
    /// it is a folder, not two files, so a restarted gateway's new socket
    /// shows through.
    pub fn fleet_dir(&self) -> PathBuf {
        self.run_dir().join("fleet")
    }

    /// The gateway's local MCP socket: HTTP over a Unix socket, admitted by
    /// kernel proof of the connecting process.
    pub fn local_mcp_socket(&self) -> PathBuf {
        self.fleet_dir().join("mcp.sock")
    }

    /// The gateway's discovery file: where bridges find its address.
    pub fn gateway_discovery(&self) -> PathBuf {
        self.fleet_dir().join("gateway.json")
    }

    /// An enrolled machine's link as its gateway last saw it.
    pub fn uplink_status(&self) -> PathBuf {
        self.fleet_dir().join("uplink.json")
    }

    /// The owner credential (0600).
    pub fn owner_credential(&self) -> PathBuf {
        self.root.join("owner.token")
    }

    /// This stack's relay identity: the certificate (and key) it shows
    /// on relay connections, as the main stack or as a remote machine.
    pub fn relay_identity(&self) -> PathBuf {
        self.root.join("relay/identity.json")
    }

    /// A remote machine's link to its main stack: where, the pinned
    /// fingerprint, its name there (`clankie fleet machine enrol`).
    pub fn relay_link(&self) -> PathBuf {
        self.root.join("relay/link.json")
    }

    /// A service's private state folder.
    pub fn service_dir(&self, service: &str) -> PathBuf {
        self.root.join(service)
    }

    /// The manual grant book.
    pub fn grants_file(&self) -> PathBuf {
        self.root.join("worker-grants").join("grants.json")
    }

    /// The connected-call receipts folder, as the seed names it.
    pub fn receipts_dir(&self) -> PathBuf {
        self.root.join("worker-grants").join("receipts")
    }

    /// Audit logs.
    pub fn audit_dir(&self) -> PathBuf {
        self.root.join("audit")
    }

    /// The services' logs (`logs/<service>.log`).
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// A stdio account's own log: what its server wrote to stderr.
    pub fn account_log(&self, account: &str) -> PathBuf {
        self.logs_dir()
            .join("accounts")
            .join(format!("{account}.log"))
    }
}

/// Herdr's API socket in Herdr's own search order: `HERDR_SOCKET_PATH`,
/// `$XDG_RUNTIME_DIR/herdr.sock`, `$XDG_CONFIG_HOME/herdr/herdr.sock`,
/// `~/.config/herdr/herdr.sock`, `/tmp/herdr.sock` (the first that exists).
pub fn herdr_socket() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut candidates = Vec::new();
    candidates.extend(env("HERDR_SOCKET_PATH"));
    candidates.extend(env("XDG_RUNTIME_DIR").map(|d| d.join("herdr.sock")));
    candidates.extend(env("XDG_CONFIG_HOME").map(|d| d.join("herdr/herdr.sock")));
    candidates.extend(env("HOME").map(|h| h.join(".config/herdr/herdr.sock")));
    candidates.push(PathBuf::from("/tmp/herdr.sock"));
    candidates.into_iter().find(|p| p.exists())
}
