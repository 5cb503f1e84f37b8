//! Worker reports (`message_clankie`) to the hiring lead, with receipts that
//! never reroute or replay an accepted report.

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::ClankieError;
use clankie_runtime::ErrorCode;
use clankie_types::fleet::DeliveryKind;
use clankie_types::transcript::{EntryKind, EntryRole};
use tonic::{Request, Response};

use crate::rpc::conversations::*;
use crate::rpc::lead_seat::{framed_report, lead_seat};
use crate::store::{EntryRec, HEAD, now_ms};
use crate::{MailboxService, internal};

impl MailboxService {
    pub(crate) async fn report(
        &self,
        request: Request<mailbox_pb::ReportRequest>,
    ) -> Result<Response<mailbox_pb::ReportResponse>, ClankieError> {
        let principal = self.pane_principal(&request).await?;
        self.hold_codex_pane(&request, &principal).await?;
        let req = request.into_inner();
        let kind = EntryKind::reported(req.kind).ok_or_else(|| {
            ErrorCode::InvalidArgument
                .err("a seat reports messages; watches and wakes are the service's own")
        })?;
        check_entry("report", &req.receipt_id, &req.text)?;
        let mut store = self.inner.store.lock().await;
        // An accepted receipt returns where it went: never rerouted, never
        // written twice, whatever changed since. Another pane's id is taken,
        // and that is all this pane learns.
        if let Some(a) = store.receipt(&req.receipt_id).cloned() {
            if !a.from_pane(&store.state, &principal.link_id, &principal.pane_id) {
                return Err(ErrorCode::ReceiptConflict
                    .err("this receipt id is taken; send the report anew without a receipt id"));
            }
            return Ok(Response::new(mailbox_pb::ReportResponse {
                receipt_id: req.receipt_id,
                conversation_id: a.conversation_id,
                seq: a.seq,
                replayed: true,
                hire_id: a.hire_id,
            }));
        }
        Self::writable(&store)?;
        // Fenced: a sealed id never sends, and one attempt per pane at a
        // time (see `report_fences`).
        let pane = (principal.link_id.as_str(), principal.pane_id.as_str());
        let mut fences = self.inner.fences.lock().await;
        self.gate_report(&store, &mut fences, pane, &req.receipt_id)?;
        let hire = store
            .state
            .hire_in(&principal.link_id, &principal.pane_id)
            .cloned();
        // The hiring lead, or the global head when the lead is gone or the
        // seat was started by hand.
        let (conversation_id, hire_id, source) = match &hire {
            Some(h) if present(&store.state, &h.conversation_id) => (
                h.conversation_id.clone(),
                h.hire_id.clone(),
                format!("hire:{}", h.hire_id),
            ),
            Some(h) => (
                HEAD.to_string(),
                h.hire_id.clone(),
                format!("hire:{}", h.hire_id),
            ),
            None => (
                HEAD.to_string(),
                String::new(),
                format!("pane:{}:{}", principal.link_id, principal.pane_id),
            ),
        };
        let at_ms = now_ms();
        let entry = EntryRec {
            seq: 0,
            kind,
            role: EntryRole::Agent,
            text: req.text.clone(),
            source: source.clone(),
            untrusted: true,
            at_ms,
            receipt_id: req.receipt_id.clone(),
            hire_id: hire_id.clone(),
        };
        self.begin_report(&mut fences, pane, &req.receipt_id)?;
        self.crash_point("report-fenced");
        let seq = match store.append(&conversation_id, entry) {
            Ok(seq) => seq,
            Err(e) => {
                // Not accepted, and this attempt is over: it can never be.
                let now = now_ms();
                let _ = self.change_fences(&mut fences, |b| {
                    b.seal(pane, &req.receipt_id, now);
                    Ok(())
                });
                return Err(internal(e));
            }
        };
        self.crash_point("report-appended");
        // Accepted; a fence left by a failed write is cleared by the pane's
        // next request.
        if let Err(e) = self.change_fences(&mut fences, |b| Ok(b.clear(pane, &req.receipt_id))) {
            tracing::warn!(reason = e.code.as_str(), "mailbox.report.fence_kept");
        }
        drop(fences);
        // A native seat driving the lead conversation hears the report as a
        // message; its receipt above already settles any repeat.
        let seat = lead_seat(&store.state, &conversation_id);
        drop(store);
        self.inner.appended.send_modify(|n| *n += 1);
        if let Some(lead) = seat {
            let text = framed_report(&source, &req.text);
            self.queue_to_lead(&lead, DeliveryKind::Message, source, text, at_ms)
                .await;
        }
        Ok(Response::new(mailbox_pb::ReportResponse {
            receipt_id: req.receipt_id,
            conversation_id,
            seq,
            replayed: false,
            hire_id,
        }))
    }
}
