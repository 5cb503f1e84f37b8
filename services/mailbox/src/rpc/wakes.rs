//! Wakes: the auto-scheduler's nudges into a lead's transcript, with receipts.

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::ClankieError;
use clankie_types::Role;
use clankie_types::fleet::DeliveryKind;
use clankie_types::transcript::{EntryKind, EntryRole, WakeSource};
use tonic::{Request, Response};

use crate::rpc::conversations::*;
use crate::seats;
use crate::store::{EntryRec, HEAD, now_ms};
use crate::{MailboxService, internal, short_id};

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
        let seat = store
            .state
            .hires
            .iter()
            .find(|h| h.is_open() && h.role == Role::Lead && h.conversation_id == conversation_id)
            .cloned();
        drop(store);
        self.inner.appended.send_modify(|n| *n += 1);
        let queued_to_seat = match seat {
            Some(h) => {
                let mut book = self.inner.book.lock().await;
                let saved = self.change_book(&mut book, |b| {
                    b.deliveries.push(seats::DeliveryRec::new(
                        short_id("dlv"),
                        (&h.link_id, &h.pane_id, ""),
                        DeliveryKind::Wake,
                        format!("wake:{}", req.wake_id),
                        req.text,
                        at_ms,
                    ));
                    Ok(())
                });
                drop(book);
                self.inner.queued.send_modify(|n| *n += 1);
                saved.is_ok()
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
