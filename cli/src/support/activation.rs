//! Sockets a service manager passed to `clankie up` (socket activation):
//! taken once at start, kept for the supervisor's life, and handed to
//! every gateway it starts, so a restarted gateway serves the same sockets
//! (callers wait in the backlog meanwhile). No other service sees them.

use std::os::fd::OwnedFd;

use anyhow::Context as _;
use clankie_types::activation::{GatewaySocket, gateway_sockets};
use command_fds::{CommandFdExt as _, FdMapping};

/// The variables of the activation protocol (`sd_listen_fds(3)`).
const LISTEN_VARS: [&str; 3] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"];
/// Where passed descriptors start, in the manager's process and the
/// gateway's.
const FIRST_FD: i32 = 3;

/// The gateway's listeners a service manager passed.
#[derive(Default)]
pub struct Passed(Vec<(GatewaySocket, OwnedFd)>);

impl Passed {
    /// Takes what the environment passed to this process; nothing when no
    /// socket was passed. Each descriptor is checked to be a listening
    /// socket of its kind (TCP or Unix stream).
    pub fn from_env() -> anyhow::Result<Passed> {
        let mut fds = listenfd::ListenFd::from_env();
        if fds.len() == 0 {
            return Ok(Passed::default());
        }
        let names = std::env::var("LISTEN_FDNAMES").ok();
        let kinds = gateway_sockets(names.as_deref(), fds.len()).map_err(anyhow::Error::msg)?;
        let mut taken = Vec::with_capacity(kinds.len());
        for (i, kind) in kinds.into_iter().enumerate() {
            let which = || format!("passed socket {} ({kind})", i + 1);
            let fd = if kind.is_unix() {
                fds.take_unix_listener(i)
                    .with_context(which)?
                    .map(OwnedFd::from)
            } else {
                fds.take_tcp_listener(i)
                    .with_context(which)?
                    .map(OwnedFd::from)
            };
            taken.push((kind, fd.with_context(which)?));
        }
        Ok(Passed(taken))
    }

    /// What was passed, by name, for the start-up line.
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// Hands the sockets to a gateway about to start, as its own activation
    /// (no `LISTEN_PID`: its pid is not known before it starts).
    pub fn hand_to(&self, cmd: &mut tokio::process::Command) -> anyhow::Result<()> {
        strip(cmd);
        if self.0.is_empty() {
            return Ok(());
        }
        let mut mappings = Vec::with_capacity(self.0.len());
        for (i, (_, fd)) in self.0.iter().enumerate() {
            mappings.push(FdMapping {
                parent_fd: fd.try_clone()?,
                child_fd: FIRST_FD + i as i32,
            });
        }
        cmd.fd_mappings(mappings)
            .map_err(|e| anyhow::anyhow!("passing the sockets on: {e}"))?;
        cmd.env("LISTEN_FDS", self.0.len().to_string())
            .env("LISTEN_FDNAMES", self.names().join(":"));
        Ok(())
    }
}

/// Keeps the activation variables from a child (the services other than
/// the gateway, and the gateway before its own are set).
pub fn strip(cmd: &mut tokio::process::Command) {
    for var in LISTEN_VARS {
        cmd.env_remove(var);
    }
}
