//! Wakes: the auto-scheduler's nudges into a lead's transcript, with receipts.

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::ClankieError;
use clankie_types::fleet::DeliveryKind;
use clankie_types::transcript::{EntryKind, EntryRole, WakeSource};
use tonic::{Request, Response};

use crate::rpc::conversations::*;
use crate::rpc::lead_seat::lead_seat;
use crate::store::{EntryRec, HEAD, now_ms};
use crate::{MailboxService, internal};

impl MailboxService {
    pub(crate) async fn wake(
        &self,
        request: Request<mailbox_pb::WakeRequest>,
    ) -> Result<Response<mailbox_pb::WakeResponse>, ClankieError> {
        self.owner(&request)?;
        let req = request.into_inner();
        check_entry("wake", &req.wake_id, &req.text)?;
        let mut store = self.inner.store.lock().await;
        // A wake id is accepted once: a repeat returns where it landed.
        if let Some(a) = store.receipt(&req.wake_id).cloned() {
            return Ok(Response::new(mailbox_pb::WakeResponse {
                found: true,
                conversation_id: a.conversation_id,
                seq: a.seq,
                replayed: true,
                queued_to_seat: false,
                at_ms: 0,
            }));
        }
        Self::writable(&store)?;
        let conversation_id = if present(&store.state, &req.conversation_id) {
            req.conversation_id.clone()
        } else {
            HEAD.to_string()
        };
        let at_ms = now_ms();
        // Unspecified is an Auto round, as an empty word was.
        let source = WakeSource::from_wire(req.source).unwrap_or(WakeSource::Auto);
        let entry = EntryRec {
            seq: 0,
            kind: EntryKind::Wake,
            role: EntryRole::System,
            text: req.text.clone(),
            source: source.as_str().into(),
            untrusted: false,
            at_ms,
            receipt_id: req.wake_id.clone(),
            hire_id: String::new(),
        };
        let seq = store.append(&conversation_id, entry).map_err(internal)?;
        // A native seat holding the conversation hears it like any message.
        let seat = lead_seat(&store.state, &conversation_id);
        drop(store);
        self.inner.appended.send_modify(|n| *n += 1);
        let queued_to_seat = match seat {
            Some(h) => {
                let from = format!("wake:{}", req.wake_id);
                self.queue_to_lead(&h, DeliveryKind::Wake, from, req.text, at_ms)
                    .await
            }
            None => false,
        };
        tracing::info!(conversation = %conversation_id, source = %source, "wake.accepted");
        Ok(Response::new(mailbox_pb::WakeResponse {
            found: true,
            conversation_id,
            seq,
            replayed: false,
            queued_to_seat,
            at_ms,
        }))
    }

    pub(crate) async fn wake_receipt(
        &self,
        request: Request<mailbox_pb::WakeReceiptRequest>,
    ) -> Result<Response<mailbox_pb::WakeResponse>, ClankieError> {
        self.owner(&request)?;
        let id = request.into_inner().wake_id;
        let store = self.inner.store.lock().await;
        Ok(Response::new(match store.receipt(&id) {
            Some(a) => mailbox_pb::WakeResponse {
                found: true,
                conversation_id: a.conversation_id.clone(),
                seq: a.seq,
                replayed: true,
                ..Default::default()
            },
            None => mailbox_pb::WakeResponse::default(),
        }))
    }
}
