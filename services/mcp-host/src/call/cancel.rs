//! A caller's cancel of its own call, after the call left the gateway.
//!
//! Each running upstream call holds a token under its receipt id from its
//! dispatch to its settlement. `CancelCall` fires it, for the receipt's own
//! caller only (the same owner check as reading the receipt back): a call
//! not yet sent is not sent, and one that was sent is cancelled at its
//! upstream with `notifications/cancelled` (`dispatch.rs`).

use std::collections::HashMap;

use clankie_runtime::{ClankieError, ErrorCode};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::receipts::Status;
use crate::{McpHost, Requester, owner_of};

/// The tokens of the calls running now, by receipt id.
#[derive(Default)]
pub(crate) struct Cancels {
    running: Mutex<HashMap<String, CancellationToken>>,
}

impl Cancels {
    /// The token a dispatched call watches, until [`Cancels::done`].
    pub(crate) fn watch(&self, receipt_id: &str) -> CancellationToken {
        self.running
            .lock()
            .entry(receipt_id.to_string())
            .or_default()
            .clone()
    }

    /// The call settled: nothing is left to cancel.
    pub(crate) fn done(&self, receipt_id: &str) {
        self.running.lock().remove(receipt_id);
    }

    /// Fires the token of a running call; false when none runs.
    fn fire(&self, receipt_id: &str) -> bool {
        match self.running.lock().get(receipt_id) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }
}

impl McpHost {
    /// Cancels `receipt_id` for its own caller; whether it was running.
    pub(crate) async fn cancel_call(
        &self,
        who: &Requester,
        receipt_id: &str,
    ) -> Result<bool, ClankieError> {
        let principal = self.principal(who, false).await?;
        let owner = owner_of(who, &principal);
        match self.inner.receipts.get(receipt_id) {
            Some(r)
                if r.fleet == principal.fleet_id
                    && r.belongs_to(&owner, &crate::audit_text(who, &principal)) =>
            {
                Ok(r.status == Status::Dispatched && self.inner.cancels.fire(receipt_id))
            }
            _ => Err(ErrorCode::ReceiptNotFound.err("no receipt with this id for this caller")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_running_call_is_fired_and_a_settled_one_is_forgotten() {
        let c = Cancels::default();
        assert!(!c.fire("r1"), "nothing runs");
        let t = c.watch("r1");
        assert!(c.fire("r1"));
        assert!(t.is_cancelled());
        c.done("r1");
        assert!(!c.fire("r1"), "settled");
        assert!(c.running.lock().is_empty());
    }
}
