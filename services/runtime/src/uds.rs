//! Unix-domain sockets: bind in a private directory, connect with tonic.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::UnixListener;
use tonic::transport::{Channel, Endpoint};

/// The longest socket path the kernel accepts (`sun_path` less the NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Binds a listener at `path`: creates its directory 0700, removes a stale
/// socket left by a dead process, and refuses to steal a live one.
pub async fn bind(path: &Path) -> io::Result<UnixListener> {
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "socket path is longer than {MAX_SOCKET_PATH} bytes; choose a shorter CLANKIE_STATE"
            ),
        ));
    }
    if let Some(dir) = path.parent() {
        crate::state::private_dir(dir)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if tokio::net::UnixStream::connect(path).await.is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "another process is serving this socket",
                ));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a non-socket file is in the way of the socket",
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    UnixListener::bind(path)
}

/// A lazily connecting gRPC channel to a Unix socket.
pub fn channel(path: &Path) -> Channel {
    let uri = format!("unix://{}", path.display());
    // The URI is built from a filesystem path; tonic accepts any such string.
    Endpoint::from_shared(uri)
        .unwrap_or_else(|_| Endpoint::from_static("unix:///nonexistent"))
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .connect_lazy()
}

/// Removes a socket file on drop (after the server stopped).
pub struct SocketGuard(pub PathBuf);

impl Drop for SocketGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
