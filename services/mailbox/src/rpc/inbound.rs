//! The fences around a worker's report (`message_clankie`): a send is
//! gated by its pane's fence and sealed ids, and a lookup of a receipt id
//! never sends. The rules are in [`crate::report_fences`].

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::state::Guarded;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::transcript::ReportState;
use tonic::{Request, Response};

use crate::MailboxService;
use crate::report_fences::{Pane, PendingFence, REPORT_DEADLINE_MS, ReportFences};
use crate::store::{Store, now_ms};

/// A report id that is never sent again.
pub(crate) fn not_delivered(receipt_id: &str) -> ClankieError {
    ErrorCode::ReceiptConflict.err(format!(
        "report {receipt_id} was settled as not delivered and is never sent again; send the report anew (without a receipt id)"
    ))
}

fn unresolved(receipt_id: &str) -> ClankieError {
    ErrorCode::ServiceUnavailable.err(format!(
        "this pane's report {receipt_id} is still being delivered; look it up by its receipt id before sending another"
    ))
}

fn unreadable() -> ClankieError {
    ErrorCode::ServiceUnavailable.err(
        "the report fences cannot be read; reports stay uncertain until the owner inspects mailbox/report-fences.json",
    )
}

impl MailboxService {
    /// Changes the report fences (the only way they change).
    pub(crate) fn change_fences<R>(
        &self,
        fences: &mut Guarded<ReportFences>,
        change: impl FnOnce(&mut ReportFences) -> Result<R, ClankieError>,
    ) -> Result<R, ClankieError> {
        crate::change(fences, "the report fences", change)
    }

    /// Before `receipt_id` (not accepted) is sent from `pane`: a sealed id
    /// is refused; the pane's earlier fence is settled once its attempt can
    /// no longer be live, and a send waits (is refused) while it can.
    pub(crate) fn gate_report(
        &self,
        store: &Store,
        fences: &mut Guarded<ReportFences>,
        pane: Pane,
        receipt_id: &str,
    ) -> Result<(), ClankieError> {
        if fences.unreadable().is_some() {
            return Err(unreadable());
        }
        if fences.is_sealed(pane, receipt_id) {
            return Err(not_delivered(receipt_id));
        }
        let Some(f) = fences.pending_in(pane).cloned() else {
            return Ok(());
        };
        let now = now_ms();
        if !f.settled_by(&self.inner.instance, now) {
            return Err(unresolved(&f.receipt_id));
        }
        let accepted = store.receipt(&f.receipt_id).is_some();
        self.change_fences(fences, |b| {
            b.settle(pane, accepted, now);
            Ok(())
        })?;
        tracing::info!(accepted, "mailbox.report.fence_settled");
        if f.receipt_id == receipt_id {
            return Err(not_delivered(receipt_id));
        }
        Ok(())
    }

    /// Records the attempt to send `receipt_id` from `pane`.
    pub(crate) fn begin_report(
        &self,
        fences: &mut Guarded<ReportFences>,
        pane: Pane,
        receipt_id: &str,
    ) -> Result<(), ClankieError> {
        let now = now_ms();
        let fence = PendingFence {
            link_id: pane.0.into(),
            pane_id: pane.1.into(),
            receipt_id: receipt_id.into(),
            owner: self.inner.instance.clone(),
            started_at_ms: now,
            deadline_ms: now + REPORT_DEADLINE_MS,
        };
        self.change_fences(fences, |b| {
            b.begin(fence);
            Ok(())
        })
    }

    /// The worker's lookup of its report by receipt id: never sends. An id
    /// this pane's mailbox never saw is sealed before it is answered, so a
    /// delayed original cannot land after its sender heard it did not.
    pub(crate) async fn report_receipt(
        &self,
        request: Request<mailbox_pb::ReportReceiptRequest>,
    ) -> Result<Response<mailbox_pb::ReportReceiptResponse>, ClankieError> {
        let principal = self.pane_principal(&request).await?;
        self.hold_codex_pane(&request, &principal).await?;
        let receipt_id = request.into_inner().receipt_id;
        clankie_types::fleet::ReceiptId::parse(&receipt_id)?;
        let pane = (principal.link_id.as_str(), principal.pane_id.as_str());
        let answer = |state: ReportState| mailbox_pb::ReportReceiptResponse {
            receipt_id: receipt_id.clone(),
            state: state.wire(),
            ..Default::default()
        };
        let store = self.inner.store.lock().await;
        let mut fences = self.inner.fences.lock().await;
        // Another pane's accepted report is not this pane's: it reads as
        // never delivered from here (and is sealed for this pane below).
        let accepted = store
            .receipt(&receipt_id)
            .filter(|a| a.from_pane(&store.state, pane.0, pane.1))
            .cloned();
        if let Some(a) = accepted {
            // Accepted history is authoritative; a fence a crash left
            // behind is cleared on the way.
            let stale = fences.unreadable().is_none()
                && fences
                    .pending_in(pane)
                    .is_some_and(|f| f.receipt_id == receipt_id);
            if stale {
                self.change_fences(&mut fences, |b| Ok(b.clear(pane, &receipt_id)))?;
            }
            return Ok(Response::new(mailbox_pb::ReportReceiptResponse {
                conversation_id: a.conversation_id,
                seq: a.seq,
                hire_id: a.hire_id,
                ..answer(ReportState::Accepted)
            }));
        }
        if fences.unreadable().is_some() {
            return Ok(Response::new(answer(ReportState::Unresolved)));
        }
        if fences.is_sealed(pane, &receipt_id) {
            return Ok(Response::new(answer(ReportState::NotDelivered)));
        }
        let now = now_ms();
        if let Some(f) = fences.pending_in(pane)
            && f.receipt_id == receipt_id
            && !f.settled_by(&self.inner.instance, now)
        {
            return Ok(Response::new(answer(ReportState::Unresolved)));
        }
        // Never accepted, and no attempt of it can be live: sealed (its
        // matching fence cleared in the same write) before the answer.
        self.change_fences(&mut fences, |b| {
            b.seal(pane, &receipt_id, now);
            Ok(())
        })?;
        tracing::info!("mailbox.report.sealed");
        Ok(Response::new(answer(ReportState::NotDelivered)))
    }
}
