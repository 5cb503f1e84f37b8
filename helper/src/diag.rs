//! Socket lookups through the kernel's sock_diag netlink family.
//!
//! A loopback TCP connection's client socket is found by its exact 4-tuple
//! (no dump: the kernel answers for that one socket or says it has none),
//! which gives the socket's inode and owning uid. The descriptor census then
//! says which processes hold that inode.

use std::net::{IpAddr, SocketAddr};

use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_sys::protocols::NETLINK_SOCK_DIAG;

/// A TCP socket as sock_diag reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSocket {
    pub inode: u64,
    pub uid: u32,
}

/// Why a lookup failed; fixed reasons, never addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagError {
    /// The kernel has no such connection (closed, or never existed).
    NotFound,
    /// The addresses are not a loopback pair of one family.
    NotLoopback,
    /// Netlink failed; the errno.
    Io(i32),
    /// The kernel's answer did not parse.
    Malformed,
}

impl DiagError {
    pub fn reason(self) -> clankie_proto::helper::v1::Reason {
        use clankie_proto::helper::v1::Reason;
        match self {
            DiagError::NotFound => Reason::SocketNotFound,
            DiagError::NotLoopback => Reason::NotLoopback,
            DiagError::Io(_) => Reason::SockDiagFailed,
            DiagError::Malformed => Reason::SockDiagMalformed,
        }
    }
}

/// Unmaps `::ffff:a.b.c.d` so both ends compare in one family.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// Finds the socket whose local end is `client` and remote end `server`:
/// the client's side of a connection the gateway accepted.
pub fn tcp_client_socket(client: SocketAddr, server: SocketAddr) -> Result<TcpSocket, DiagError> {
    let (src, dst) = (canonical(client.ip()), canonical(server.ip()));
    if !src.is_loopback() || !dst.is_loopback() || src.is_ipv4() != dst.is_ipv4() {
        return Err(DiagError::NotLoopback);
    }
    let family = if src.is_ipv4() { AF_INET } else { AF_INET6 };
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST;
    let mut packet = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::all(),
            socket_id: SocketId {
                source_port: client.port(),
                destination_port: server.port(),
                source_address: src,
                destination_address: dst,
                interface_id: 0,
                // All ones: match by address, not by cookie.
                cookie: [0xff; 8],
            },
        })
        .into(),
    );
    packet.finalize();
    let mut out = vec![0; packet.buffer_len()];
    packet.serialize(&mut out);

    let io = |e: std::io::Error| DiagError::Io(e.raw_os_error().unwrap_or(0));
    let mut socket = netlink_sys::Socket::new(NETLINK_SOCK_DIAG).map_err(io)?;
    socket.bind_auto().map_err(io)?;
    socket
        .connect(&netlink_sys::SocketAddr::new(0, 0))
        .map_err(io)?;
    socket.send(&out, 0).map_err(io)?;
    let mut buf = Vec::with_capacity(8192);
    let n = socket.recv(&mut buf, 0).map_err(io)?;
    let reply = <NetlinkMessage<SockDiagMessage>>::deserialize(&buf[..n.min(buf.len())])
        .map_err(|_| DiagError::Malformed)?;
    match reply.payload {
        // A socket in TIME_WAIT has no inode and no holder.
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) if r.header.inode == 0 => {
            Err(DiagError::NotFound)
        }
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => Ok(TcpSocket {
            inode: u64::from(r.header.inode),
            uid: r.header.uid,
        }),
        NetlinkPayload::Error(e) => match e.code.map(|c| -c.get()) {
            Some(2) => Err(DiagError::NotFound), // ENOENT
            Some(errno) => Err(DiagError::Io(errno)),
            None => Err(DiagError::Malformed),
        },
        _ => Err(DiagError::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn finds_the_client_end_of_a_loopback_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = std::net::TcpStream::connect(listener.local_addr().expect("test value"))
            .expect("connect");
        let (_server, peer) = listener.accept().expect("accept");
        let want = std::fs::metadata(format!("/proc/self/fd/{}", client.as_raw_fd()))
            .expect("fd")
            .ino();
        let found =
            tcp_client_socket(peer, listener.local_addr().expect("test value")).expect("found");
        assert_eq!(found.inode, want);
        assert_eq!(found.uid, rustix::process::getuid().as_raw());
        // The reversed tuple is the server's end, a different socket.
        let server_end =
            tcp_client_socket(listener.local_addr().expect("test value"), peer).expect("server");
        assert_ne!(server_end.inode, want);
        drop(client);
        let gone: SocketAddr = "127.0.0.1:1".parse().expect("test value");
        assert_eq!(
            tcp_client_socket(gone, listener.local_addr().expect("test value")),
            Err(DiagError::NotFound)
        );
        let remote: SocketAddr = "10.1.2.3:5".parse().expect("test value");
        assert_eq!(
            tcp_client_socket(remote, listener.local_addr().expect("test value")),
            Err(DiagError::NotLoopback)
        );
    }
}
