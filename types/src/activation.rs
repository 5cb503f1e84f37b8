//! Socket activation of the gateway's listeners: which listener each
//! descriptor a service manager passed is, by its name in
//! `LISTEN_FDNAMES` (systemd's `FileDescriptorName=`,
//! `systemd-socket-activate --fdname=`). `clankie up` takes them and hands
//! them on to every gateway it starts, so a restarted gateway serves the
//! same sockets and callers queue in their backlog meanwhile.

/// One of the gateway's listeners.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatewaySocket {
    /// The bearer listener (TCP; `127.0.0.1:7755` by default).
    Bearer,
    /// The local loopback TCP listener for pane clients.
    LocalTcp,
    /// The local Unix socket (`run/fleet/mcp.sock`).
    LocalUnix,
}

impl GatewaySocket {
    /// The names, as a socket unit gives them.
    pub const WORDS: [&'static str; 3] = ["bearer", "local-tcp", "local-unix"];

    pub fn as_str(self) -> &'static str {
        match self {
            GatewaySocket::Bearer => "bearer",
            GatewaySocket::LocalTcp => "local-tcp",
            GatewaySocket::LocalUnix => "local-unix",
        }
    }

    pub fn parse(name: &str) -> Option<GatewaySocket> {
        [
            GatewaySocket::Bearer,
            GatewaySocket::LocalTcp,
            GatewaySocket::LocalUnix,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }

    /// Whether it is a Unix socket (else TCP).
    pub fn is_unix(self) -> bool {
        self == GatewaySocket::LocalUnix
    }
}

impl std::fmt::Display for GatewaySocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which listener each of `count` passed descriptors is, from the
/// `LISTEN_FDNAMES` value `names` (absent: none named). One descriptor that
/// bears none of the gateway's names is the bearer listener (a socket unit
/// names its descriptor after itself unless told otherwise).
pub fn gateway_sockets(names: Option<&str>, count: usize) -> Result<Vec<GatewaySocket>, String> {
    let names: Vec<&str> = names.map(|n| n.split(':').collect()).unwrap_or_default();
    if count == 1 {
        let only = names.first().copied().unwrap_or("");
        return Ok(vec![
            GatewaySocket::parse(only).unwrap_or(GatewaySocket::Bearer),
        ]);
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let name = names.get(i).copied().unwrap_or("");
        let socket = GatewaySocket::parse(name).ok_or_else(|| {
            format!(
                "passed socket {} is named {name:?}, none of the gateway's: name each {} (FileDescriptorName=)",
                i + 1,
                GatewaySocket::WORDS.join(", ")
            )
        })?;
        if out.contains(&socket) {
            return Err(format!("two passed sockets are named {socket}"));
        }
        out.push(socket);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_which_listener_and_a_lone_socket_is_the_bearer() {
        use GatewaySocket::*;
        assert_eq!(gateway_sockets(None, 0), Ok(vec![]));
        assert_eq!(gateway_sockets(None, 1), Ok(vec![Bearer]));
        assert_eq!(gateway_sockets(Some("clankie.socket"), 1), Ok(vec![Bearer]));
        assert_eq!(gateway_sockets(Some("local-tcp"), 1), Ok(vec![LocalTcp]));
        assert_eq!(
            gateway_sockets(Some("local-unix:bearer"), 2),
            Ok(vec![LocalUnix, Bearer])
        );
        assert!(gateway_sockets(Some("bearer:web"), 2).is_err());
        assert!(gateway_sockets(Some("bearer:bearer"), 2).is_err());
        assert!(gateway_sockets(None, 2).is_err());
    }
}
