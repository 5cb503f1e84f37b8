//! The one way an internal gRPC socket accepts connections.
//!
//! Each accepted connection is classified once, at accept, from kernel
//! facts ([`crate::peer`]); the class rides in the request extensions of
//! every request on it. The [`CallerLayer`] then lets a request through only
//! when it comes from a process of this stack, or carries the owner
//! credential (the CLI). Everything else is refused with
//! `internal_caller_refused` before any handler, health check or
//! reflection runs. Handlers that must hear from one service only (a pid
//! named by the gateway) read the class with [`caller`].

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::{Stream, StreamExt as _};
use tonic::transport::server::Connected;

use crate::authority::AuthorityFix;
use crate::code::ErrorCode;
use crate::owner::OwnerCheck;
pub use crate::peer::{InternalPeer, StackRule};

/// An accepted connection with its peer's class. What it reads passes
/// through [`AuthorityFix`] until the first request shows a real
/// authority (a stock grpcurl's socket path is made `localhost`).
pub struct CallerStream {
    inner: UnixStream,
    caller: InternalPeer,
    fix: AuthorityFix,
    /// Bytes the fix let through, not yet read by the server.
    ready: Vec<u8>,
    /// How much of `ready` was read.
    taken: usize,
}

impl Connected for CallerStream {
    type ConnectInfo = InternalPeer;

    fn connect_info(&self) -> InternalPeer {
        self.caller
    }
}

impl AsyncRead for CallerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.taken < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.taken);
                buf.put_slice(&this.ready[this.taken..this.taken + n]);
                this.taken += n;
                if this.taken == this.ready.len() {
                    this.ready.clear();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.fix.passing() {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            let mut raw = [0u8; 8192];
            let mut raw = ReadBuf::new(&mut raw);
            match Pin::new(&mut this.inner).poll_read(cx, &mut raw) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                // The end: what is held goes through as it came, then EOF.
                Poll::Ready(Ok(())) if raw.filled().is_empty() => {
                    this.fix.finish(&mut this.ready);
                    if this.ready.is_empty() {
                        return Poll::Ready(Ok(()));
                    }
                }
                Poll::Ready(Ok(())) => this.fix.feed(raw.filled(), &mut this.ready),
            }
        }
    }
}

impl AsyncWrite for CallerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Accepts connections on `listener`, each classified by `rule`.
pub fn incoming(
    listener: UnixListener,
    rule: StackRule,
) -> impl Stream<Item = std::io::Result<CallerStream>> {
    tokio_stream::wrappers::UnixListenerStream::new(listener).map(move |accepted| {
        accepted.map(|inner| CallerStream {
            caller: rule.classify(&inner),
            inner,
            fix: AuthorityFix::default(),
            ready: Vec::new(),
            taken: 0,
        })
    })
}

/// The class of the connection a request arrived on (`Other` when the
/// request did not come through [`incoming`]).
pub fn caller<T>(req: &tonic::Request<T>) -> InternalPeer {
    req.extensions()
        .get::<InternalPeer>()
        .copied()
        .unwrap_or(InternalPeer::Other)
}

/// Refuses unless the request came from the named service of this stack.
pub fn require_service<T>(req: &tonic::Request<T>, service: &str) -> Result<(), tonic::Status> {
    match caller(req) {
        InternalPeer::Stack(s) if s == service => Ok(()),
        _ => {
            tracing::info!(
                reason = ErrorCode::InternalCallerRefused.as_str(),
                only = service,
                "internal.refused"
            );
            Err(refused(&format!(
                "only the {service} may call this; it names processes by kernel facts"
            )))
        }
    }
}

/// The caller check's refusal (its callers log it as `internal.refused`).
#[allow(
    clippy::disallowed_methods,
    reason = "the caller check logs its own refusal, with who may call"
)]
fn refused(message: &str) -> tonic::Status {
    ErrorCode::InternalCallerRefused.err(message).into_status()
}

/// The accept-time caller check as a tower layer.
#[derive(Clone)]
pub struct CallerLayer {
    owner: Option<Arc<OwnerCheck>>,
    service: &'static str,
}

impl CallerLayer {
    /// `owner` is the owner credential's check; `None` admits only the stack.
    pub fn new(service: &'static str, owner: Option<OwnerCheck>) -> Self {
        CallerLayer {
            owner: owner.map(Arc::new),
            service,
        }
    }
}

impl<S> tower::Layer<S> for CallerLayer {
    type Service = CallerCheck<S>;

    fn layer(&self, inner: S) -> CallerCheck<S> {
        CallerCheck {
            inner,
            layer: self.clone(),
        }
    }
}

/// The gRPC services any process on the socket may call: health and
/// reflection (v1 and v1alpha). Their handlers read no caller.
fn open_to_tools(path: &str) -> bool {
    [
        "/grpc.health.v1.Health/",
        "/grpc.reflection.v1.ServerReflection/",
        "/grpc.reflection.v1alpha.ServerReflection/",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// The service [`CallerLayer`] builds.
#[derive(Clone)]
pub struct CallerCheck<S> {
    inner: S,
    layer: CallerLayer,
}

impl<S, B, R> tower::Service<http::Request<B>> for CallerCheck<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let class = req
            .extensions()
            .get::<InternalPeer>()
            .copied()
            .unwrap_or(InternalPeer::Other);
        let admitted = match class {
            InternalPeer::Stack(_) => Some(class),
            // Health and reflection say nothing a same-user process could
            // not read from the binaries: stock tools need no credential.
            _ if open_to_tools(req.uri().path()) => Some(class),
            _ => self
                .layer
                .owner
                .as_ref()
                .filter(|o| o.matches_headers(req.headers()))
                .map(|_| InternalPeer::Owner),
        };
        match admitted {
            Some(class) => {
                req.extensions_mut().insert(class);
                Box::pin(self.inner.call(req))
            }
            None => {
                tracing::info!(
                    reason = ErrorCode::InternalCallerRefused.as_str(),
                    service = self.layer.service,
                    "internal.refused"
                );
                let status = refused(
                    "this socket serves its own stack; owner commands present the owner credential",
                );
                Box::pin(async move { Ok(status.into_http()) })
            }
        }
    }
}
