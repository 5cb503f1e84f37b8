//! A client transport that shows each incoming MCP message to an observer
//! before the rmcp service sees it.
//!
//! rmcp hands notifications to a client's handler in tasks of their own,
//! so a progress step or log line sent just before a response can reach
//! the handler after the response has settled its request. Observed here,
//! in the order the peer sent them, every step of a call is where it
//! belongs before the call's answer is even read.

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::Transport;

/// What sees each message, in wire order; it must not block.
pub type Observer = Arc<dyn Fn(&RxJsonRpcMessage<RoleClient>) + Send + Sync>;

/// `inner`, with `observer` shown every message it receives.
pub struct Tap<T> {
    inner: T,
    observer: Observer,
}

impl<T> Tap<T> {
    pub fn new(inner: T, observer: Observer) -> Self {
        Tap { inner, observer }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Tap<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await;
        if let Some(m) = &message {
            (self.observer)(m);
        }
        message
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
