//! Reading a pane host's event stream into its [`PaneMap`], line by line,
//! so that [`PaneMap::holds`] can tell when everything the host wrote has
//! been applied: the map is marked as applying from just before each read
//! until the lines it returned are applied.

use std::future::Future;
use std::io;

use crate::map::PaneMap;

/// A non-blocking byte stream tokio can wait on without reading.
pub(crate) trait Source {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send;
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize>;
}

impl Source for tokio::net::unix::pipe::Receiver {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        tokio::net::unix::pipe::Receiver::readable(self)
    }
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        tokio::net::unix::pipe::Receiver::try_read(self, buf)
    }
}

impl Source for tokio::net::UnixStream {
    fn readable(&self) -> impl Future<Output = io::Result<()>> + Send {
        tokio::net::UnixStream::readable(self)
    }
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        tokio::net::UnixStream::try_read(self, buf)
    }
}

/// The longest line a stream may send (a tmux pane list of thousands of
/// panes is tens of KiB).
const MAX_LINE: usize = 4 << 20;

/// Why reading ended.
pub(crate) enum Ended {
    /// The stream closed, failed, or sent a line too long.
    Stream,
    /// A line asked for this stream to end.
    Asked,
    /// Nobody holds the map any more.
    Unheld,
}

/// Feeds `source`'s lines to `apply` (which returns false to end) until the
/// stream ends. Every 10 s of silence it checks that someone besides this
/// reader still holds the map.
pub(crate) async fn read_lines(
    source: &impl Source,
    map: &std::sync::Arc<PaneMap>,
    mut apply: impl FnMut(&str) -> bool,
) -> Ended {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let ready = tokio::select! {
            ready = source.readable() => ready,
            _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => {
                if std::sync::Arc::strong_count(map) <= 1 {
                    return Ended::Unheld;
                }
                continue;
            }
        };
        if ready.is_err() {
            return Ended::Stream;
        }
        map.applying(true);
        let n = match source.try_read(&mut chunk) {
            Ok(0) => return Ended::Stream,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                map.applying(!buf.is_empty());
                continue;
            }
            Err(_) => return Ended::Stream,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(end) = buf[start..].iter().position(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(&buf[start..start + end]).into_owned();
            start += end + 1;
            if !apply(&line) {
                return Ended::Asked;
            }
        }
        buf.drain(..start);
        if buf.len() > MAX_LINE {
            return Ended::Stream;
        }
        // A partial line is still unapplied: stay marked until it ends.
        map.applying(!buf.is_empty());
    }
}
