//! The listeners a service manager passed (socket activation, handed on by
//! `clankie up`, or given to the gateway directly): each taken by its name
//! (`clankie_types::activation`) in place of binding its address.

use clankie_types::activation::{GatewaySocket, gateway_sockets};

/// The passed listeners, not yet served.
#[derive(Default)]
pub struct Passed {
    bearer: Option<std::net::TcpListener>,
    local_tcp: Option<std::net::TcpListener>,
    local_unix: Option<std::os::unix::net::UnixListener>,
}

impl Passed {
    /// Takes what the environment passed (`LISTEN_FDS`, `LISTEN_FDNAMES`);
    /// nothing when no socket was passed. A descriptor that is not a
    /// listening socket of its kind is an error, never served.
    pub fn from_env() -> anyhow::Result<Passed> {
        let mut fds = listenfd::ListenFd::from_env();
        let mut passed = Passed::default();
        if fds.len() == 0 {
            return Ok(passed);
        }
        let names = std::env::var("LISTEN_FDNAMES").ok();
        let kinds = gateway_sockets(names.as_deref(), fds.len()).map_err(anyhow::Error::msg)?;
        for (i, kind) in kinds.into_iter().enumerate() {
            let which = || anyhow::anyhow!("passed socket {} ({kind}) was already taken", i + 1);
            match kind {
                GatewaySocket::Bearer => {
                    passed.bearer = Some(fds.take_tcp_listener(i)?.ok_or_else(which)?);
                }
                GatewaySocket::LocalTcp => {
                    passed.local_tcp = Some(fds.take_tcp_listener(i)?.ok_or_else(which)?);
                }
                GatewaySocket::LocalUnix => {
                    passed.local_unix = Some(fds.take_unix_listener(i)?.ok_or_else(which)?);
                }
            }
        }
        Ok(passed)
    }

    /// The bearer listener, if it was passed.
    pub(crate) fn take_bearer(&mut self) -> anyhow::Result<Option<tokio::net::TcpListener>> {
        tcp(self.bearer.take())
    }

    /// The local loopback TCP listener, if it was passed.
    pub(crate) fn take_local_tcp(&mut self) -> anyhow::Result<Option<tokio::net::TcpListener>> {
        tcp(self.local_tcp.take())
    }

    /// The local Unix socket, if it was passed.
    pub(crate) fn take_local_unix(&mut self) -> anyhow::Result<Option<tokio::net::UnixListener>> {
        self.local_unix
            .take()
            .map(|l| {
                l.set_nonblocking(true)?;
                Ok(tokio::net::UnixListener::from_std(l)?)
            })
            .transpose()
    }
}

fn tcp(l: Option<std::net::TcpListener>) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    l.map(|l| {
        l.set_nonblocking(true)?;
        Ok(tokio::net::TcpListener::from_std(l)?)
    })
    .transpose()
}
