//! Seats: deliveries from the lead, polls, acks, claims, peer messages with
//! receipts, and the seat book that holds them.

use clankie_runtime::clients::{Call, INTERNAL};
use clankie_types::Role;
use clankie_types::fleet::DeliveryKind;
use clankie_types::transcript::{EntryKind, EntryRole};
use std::time::Duration;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::state::Guarded;
use clankie_runtime::{ClankieError, ErrorCode};
use serde_json::json;
use tonic::{Request, Response};

use crate::codex_seats::Proc;
use crate::convert::*;
use crate::rpc::conversations::*;
use crate::seats;
use crate::store::{EntryRec, HEAD, HireRec, now_ms};
use crate::{MAX_REPORT, MAX_WAIT};
use crate::{MailboxService, short_id};

/// Why peer messages are refused: the owner's switch, or a settings file
/// that cannot be read (never reported as the owner's choice).
pub(crate) fn peers_off(settings: &admission_pb::FleetSettings) -> ClankieError {
    if settings.unreadable {
        ErrorCode::SettingsUnreadable.err(
            "the fleet settings cannot be read, so peer messages read as off until the owner repairs them",
        )
    } else {
        ErrorCode::PeerMessagesOff.err("the owner turned peer messages off")
    }
}
/// A seat counts as reachable while its bridge polled within this long.
pub const ROUTE_FRESH: Duration = Duration::from_secs(60);
impl MailboxService {
    /// Changes the seat book (see [`crate::change`]).
    pub(crate) fn change_book<R>(
        &self,
        book: &mut Guarded<seats::SeatBook>,
        change: impl FnOnce(&mut seats::SeatBook) -> Result<R, ClankieError>,
    ) -> Result<R, ClankieError> {
        crate::change(book, "the seat book", change)
    }

    /// Changes the seat book when the change says it changed anything.
    pub(crate) fn change_book_when<R>(
        &self,
        book: &mut Guarded<seats::SeatBook>,
        change: impl FnOnce(&mut seats::SeatBook) -> Result<(R, bool), ClankieError>,
    ) -> Result<R, ClankieError> {
        crate::change_when(book, "the seat book", change)
    }

    /// Appends one audit line (fsynced); a failure is logged, not fatal.
    pub(crate) fn audit(&self, line: &serde_json::Value) {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let result = (|| {
            if let Some(dir) = self.inner.audit_path.parent() {
                clankie_runtime::state::private_dir(dir)?;
            }
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.inner.audit_path)?;
            let mut bytes = serde_json::to_vec(line)?;
            bytes.push(b'\n');
            clankie_runtime::blocking::off_worker(|| {
                f.write_all(&bytes)?;
                f.sync_data()
            })
        })();
        if let Err(e) = result {
            tracing::error!(error = %e, "peer message audit not written");
        }
    }

    pub(crate) fn reachable(&self, seat_id: &str) -> bool {
        self.inner
            .bridges
            .lock()
            .reachable(seat_id, ROUTE_FRESH, std::time::Instant::now())
    }

    /// Notes a seat's poll by its bridge process, with the tools it offers.
    pub(crate) fn note_poll(&self, seat_id: &str, owner: Option<Proc>, tools: &[String]) {
        self.inner
            .bridges
            .lock()
            .note(seat_id, owner, tools, std::time::Instant::now(), now_ms());
    }

    /// Live panes per linked pane host, and when the listing began (hosts
    /// that cannot be listed are left out: unknown is not gone).
    pub(crate) async fn live_panes(&self) -> crate::panes::Listing {
        let mut live = crate::panes::Listing::new(now_ms());
        let links = {
            let call = Call::new(admission_pb::FleetStatusRequest {})
                .timeout(INTERNAL)
                .request();
            self.inner
                .admission
                .clone()
                .fleet_status(call)
                .await
                .map(|r| r.into_inner().links)
                .unwrap_or_default()
        };
        for l in &links {
            if let Ok(panes) = crate::panes::live(l).await {
                live.listed(l.link_id.clone(), panes);
            }
        }
        live
    }

    /// Marks seats whose pane closed as gone (settling their messages).
    pub(crate) async fn sweep_gone(&self) -> Result<(), ClankieError> {
        let live = self.live_panes().await;
        let mut book = self.inner.book.lock().await;
        let closed: Vec<(String, String)> = book
            .seats
            .iter()
            .filter(|s| !s.gone && live.closed(&s.link_id, &s.pane_id, s.recorded_at_ms))
            .map(|s| (s.link_id.clone(), s.pane_id.clone()))
            .collect();
        let now = now_ms();
        if closed.is_empty() && !book.has_stale(now) {
            return Ok(());
        }
        self.change_book(&mut book, |b| {
            b.supersede_stale(now);
            for (link, pane) in closed {
                b.pane_gone(&link, &pane, now);
            }
            Ok(())
        })
    }

    pub(crate) fn seat_pb(&self, s: &seats::SeatRec, hires: &[HireRec]) -> mailbox_pb::Seat {
        let hire = crate::store::hire_in(hires, &s.link_id, &s.pane_id);
        mailbox_pb::Seat {
            seat_id: s.seat_id.clone(),
            fleet: s.fleet.clone(),
            pane_id: s.pane_id.clone(),
            link_id: s.link_id.clone(),
            hire_id: hire.map(|h| h.hire_id.clone()).unwrap_or_default(),
            role: Role::wire_or_unspecified(hire.map(|h| h.role)),
            project_id: hire.map(|h| h.project_id.clone()).unwrap_or_default(),
            agent_pid: s.agent_pid,
            agent_pidfs_id: s.agent_pidfs_id,
            agent_start_time: s.agent_start_time,
            agent_executable: s.agent_executable.clone(),
            reachable: !s.gone && self.reachable(&s.seat_id),
        }
    }

    /// Queues a mailbox delivery to this exact seat (in its pane).
    pub(crate) async fn deliver(
        &self,
        seat: &seats::SeatRec,
        kind: DeliveryKind,
        from: String,
        text: String,
    ) -> Result<(), ClankieError> {
        let to = (
            seat.link_id.as_str(),
            seat.pane_id.as_str(),
            seat.seat_id.as_str(),
        );
        self.queue(to, kind, from, text, now_ms()).await.map(|_| ())
    }

    /// Queues one delivery to a pane (`to`: link, pane, and the exact seat
    /// or "" for whoever holds the pane) and wakes the waiting polls;
    /// returns its id once saved.
    pub(crate) async fn queue(
        &self,
        to: (&str, &str, &str),
        kind: DeliveryKind,
        from: String,
        text: String,
        at_ms: i64,
    ) -> Result<String, ClankieError> {
        let delivery_id = short_id("dlv");
        let mut book = self.inner.book.lock().await;
        self.change_book(&mut book, |b| {
            b.deliveries.push(seats::DeliveryRec::new(
                delivery_id.clone(),
                to,
                kind,
                from,
                text,
                at_ms,
            ));
            Ok(())
        })?;
        drop(book);
        crate::metrics::queued(kind.as_str());
        self.inner.queued.send_modify(|n| *n += 1);
        Ok(delivery_id)
    }

    pub(crate) async fn message_seat(
        &self,
        request: Request<mailbox_pb::MessageSeatRequest>,
    ) -> Result<Response<mailbox_pb::MessageSeatResponse>, ClankieError> {
        self.owner(&request)?;
        let req = request.into_inner();
        if req.text.trim().is_empty() || req.text.len() > MAX_REPORT {
            return Err(ErrorCode::InvalidArgument.err("a message is 1 byte to 32 KiB of text"));
        }
        let mut store = self.inner.store.lock().await;
        Self::writable(&store)?;
        let caller_id = caller(&store.state, &req.conversation_id)?;
        let index = store
            .state
            .hires
            .iter()
            .position(|h| h.hire_id == req.hire_id && h.is_open())
            .ok_or_else(|| ErrorCode::HireNotFound.err(format!("no open hire {}", req.hire_id)))?;
        let hire = store.state.hires[index].clone();
        // A hire whose lead is gone is adopted by the conversation messaging it.
        let adopted = !present(&store.state, &hire.conversation_id);
        if adopted {
            store.change(|s| {
                s.hires[index].conversation_id = caller_id.clone();
                Ok(())
            })?;
        }
        let owner_conversation_id = store.state.hires[index].conversation_id.clone();
        drop(store);
        let delivery_id = self
            .queue(
                (&hire.link_id, &hire.pane_id, ""),
                DeliveryKind::Lead,
                format!("conversation:{caller_id}"),
                req.text,
                now_ms(),
            )
            .await?;
        Ok(Response::new(mailbox_pb::MessageSeatResponse {
            delivery_id,
            owner_conversation_id,
            adopted,
        }))
    }

    pub(crate) async fn seat_poll(
        &self,
        request: Request<mailbox_pb::SeatPollRequest>,
    ) -> Result<Response<mailbox_pb::SeatPollResponse>, ClankieError> {
        let observed = self.control_seat(&request).await?;
        let req = request.into_inner();
        let wait = Duration::from_millis(u64::from(req.wait_ms)).min(MAX_WAIT);
        let deadline = tokio::time::Instant::now() + wait;
        // A hire's deliveries wait until its seat is ready.
        let ready = self.ready(&observed, &req.tools).await?;
        let owner = observed.owner;
        let seat = observed.seat;
        if !ready {
            self.note_poll(&seat.seat_id, owner, &req.tools);
            tokio::time::sleep_until(deadline).await;
            return Ok(Response::new(mailbox_pb::SeatPollResponse {
                seat_id: seat.seat_id,
                deliveries: Vec::new(),
            }));
        }
        let mut changes = self.inner.queued.subscribe();
        loop {
            self.note_poll(&seat.seat_id, owner, &req.tools);
            let pending = self.inner.book.lock().await.pending(&seat);
            if !pending.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(Response::new(mailbox_pb::SeatPollResponse {
                    seat_id: seat.seat_id,
                    deliveries: pending.into_iter().map(delivery_pb).collect(),
                }));
            }
            let _ = tokio::time::timeout_at(deadline, changes.changed()).await;
        }
    }

    pub(crate) async fn seat_ack(
        &self,
        request: Request<mailbox_pb::SeatAckRequest>,
    ) -> Result<Response<mailbox_pb::SeatAckResponse>, ClankieError> {
        let seat = self.control_seat(&request).await?.seat;
        let req = request.into_inner();
        let delivery_id = req.delivery_id;
        let mut book = self.inner.book.lock().await;
        let recorded = self.change_book_when(&mut book, |b| {
            let recorded = b
                .ack(&seat, &delivery_id, &req.claim_id, now_ms())
                .ok_or_else(|| {
                    ErrorCode::ReceiptNotFound
                        .err("no such delivery under this claim for this seat")
                })?;
            Ok((recorded, recorded))
        })?;
        if recorded {
            tracing::info!(delivery = %delivery_id, "mailbox.delivery.acknowledged");
        }
        Ok(Response::new(mailbox_pb::SeatAckResponse { recorded }))
    }

    pub(crate) async fn list_peers(
        &self,
        request: Request<mailbox_pb::ListPeersRequest>,
    ) -> Result<Response<mailbox_pb::ListPeersResponse>, ClankieError> {
        let (me, settings) = self.native_seat(&request).await?;
        if !settings.peer_messages {
            return Err(peers_off(&settings));
        }
        self.sweep_gone().await?;
        let hires = self.inner.store.lock().await.state.hires.clone();
        let book = self.inner.book.lock().await;
        let seats = book
            .seats
            .iter()
            .filter(|s| !s.gone && s.fleet == me.fleet && s.seat_id != me.seat_id)
            .map(|s| self.seat_pb(s, &hires))
            .collect();
        Ok(Response::new(mailbox_pb::ListPeersResponse {
            self_: Some(self.seat_pb(&me, &hires)),
            seats,
        }))
    }

    pub(crate) async fn send_peer(
        &self,
        request: Request<mailbox_pb::SendPeerRequest>,
    ) -> Result<Response<mailbox_pb::PeerReceipt>, ClankieError> {
        let (me, settings) = self.native_seat(&request).await?;
        // Off refuses every new send, stale catalogs included.
        if !settings.peer_messages {
            return Err(peers_off(&settings));
        }
        let req = request.into_inner();
        if req.text.trim().is_empty() || req.text.len() > MAX_REPORT {
            return Err(ErrorCode::InvalidArgument.err("a message is 1 byte to 32 KiB of text"));
        }
        clankie_types::fleet::ReceiptId::parse(&req.receipt_id)?;
        // No pane sweep here: a closed recipient stops polling and loses its
        // live route; a closed hire marks its seats gone at once; receipt
        // reads reconcile the rest.
        let mut book = self.inner.book.lock().await;
        let recipient = book
            .seat(&req.seat)
            .filter(|r| !r.gone && r.fleet == me.fleet && r.seat_id != me.seat_id)
            .cloned();
        // An earlier send under this receipt id answers even if the
        // recipient has gone since.
        if let Some(m) = book
            .peer_messages
            .iter()
            .find(|m| m.receipt_id == req.receipt_id && m.sender_seat == me.seat_id)
        {
            return Ok(Response::new(receipt_pb(m, true)));
        }
        let Some(recipient) = recipient else {
            return Err(ErrorCode::RecipientUnknown
                .err("no such current seat in this fleet; list the seats again"));
        };
        if !self.reachable(&recipient.seat_id) {
            return Err(
                ErrorCode::RecipientUnknown.err("that seat has no live delivery route right now")
            );
        }
        let now = now_ms();
        let receipt = self.change_book(&mut book, |b| {
            let outcome = b.send(
                &me,
                &recipient,
                &req.receipt_id,
                &req.text,
                short_id("pm"),
                short_id("dlv"),
                now,
            );
            let (index, original) = match outcome {
                seats::SendOutcome::Original(i) => (i, true),
                seats::SendOutcome::Sent(i) => (i, false),
            };
            Ok(receipt_pb(&b.peer_messages[index], original))
        })?;
        let original = receipt.original;
        drop(book);
        if !original {
            self.inner.queued.send_modify(|n| *n += 1);
            self.audit(&json!({
                "event": "peer_message.sent",
                "atMs": now,
                "peerMessageId": receipt.peer_message_id,
                "receiptId": receipt.receipt_id,
                "fleet": me.fleet,
                "sender": me.seat_id,
                "senderPane": me.pane_id,
                "recipient": recipient.seat_id,
                "follows": receipt.follows,
            }));
            tracing::info!(
                message = %receipt.peer_message_id,
                sender = %me.seat_id,
                recipient = %recipient.seat_id,
                "mailbox.peer_message.sent"
            );
            // The sender's lead (its hiring conversation, or the global head)
            // records it as agent output with source `peer`; no one is woken.
            let mut store = self.inner.store.lock().await;
            let conversation = store
                .state
                .hire_in(&me.link_id, &me.pane_id)
                .map(|h| h.conversation_id.clone())
                .filter(|c| present(&store.state, c))
                .unwrap_or_else(|| HEAD.to_string());
            let entry = EntryRec {
                seq: 0,
                kind: EntryKind::Peer,
                role: EntryRole::Agent,
                text: format!(
                    "[peer message {} from seat {} to seat {}] {}",
                    receipt.peer_message_id, me.seat_id, recipient.seat_id, req.text
                ),
                source: "peer".into(),
                untrusted: true,
                at_ms: now,
                receipt_id: String::new(),
                hire_id: String::new(),
            };
            if let Err(e) = store.append(&conversation, entry) {
                tracing::error!(error = %e, "peer message not written to the transcript");
            }
            drop(store);
            self.inner.appended.send_modify(|n| *n += 1);
        }
        Ok(Response::new(receipt))
    }

    pub(crate) async fn get_peer_receipt(
        &self,
        request: Request<mailbox_pb::GetPeerReceiptRequest>,
    ) -> Result<Response<mailbox_pb::PeerReceipt>, ClankieError> {
        // Reads stay allowed with peer messages off.
        let (me, _) = self.native_seat(&request).await?;
        let id = request.into_inner().peer_message_id;
        self.sweep_gone().await?;
        let book = self.inner.book.lock().await;
        let m = book
            .peer_messages
            .iter()
            .find(|m| m.id == id && m.sender_seat == me.seat_id)
            .ok_or_else(|| ErrorCode::ReceiptNotFound.err("no such peer message of yours"))?;
        Ok(Response::new(receipt_pb(m, true)))
    }

    pub(crate) async fn seat_tools(
        &self,
        request: Request<mailbox_pb::SeatToolsRequest>,
    ) -> Result<Response<mailbox_pb::SeatToolsResponse>, ClankieError> {
        // The gateway rechecked this ticket for the request it serves.
        let principal = self.ticket_pane(&request).await?;
        self.hold_codex_pane(&request, &principal).await?;
        let store = self.inner.store.lock().await;
        let reviews = store
            .state
            .hire_in(&principal.link_id, &principal.pane_id)
            .and_then(|h| {
                store
                    .state
                    .projects
                    .iter()
                    .find(|p| p.project_id == h.project_id)
            })
            .is_some_and(|p| p.standing_reviewer);
        let lead = store
            .state
            .hire_in(&principal.link_id, &principal.pane_id)
            .is_some_and(|h| h.role == Role::Lead);
        Ok(Response::new(mailbox_pb::SeatToolsResponse {
            reviews,
            lead,
        }))
    }

    pub(crate) async fn seat_claim(
        &self,
        request: Request<mailbox_pb::SeatClaimRequest>,
    ) -> Result<Response<mailbox_pb::SeatClaimResponse>, ClankieError> {
        let seat = self.control_seat(&request).await?.seat;
        let ids = request.into_inner().delivery_ids;
        let claim_id = short_id("claim");
        let mut book = self.inner.book.lock().await;
        // The claim is durable before the bridge hears of it.
        let held = self.change_book_when(&mut book, |b| {
            let held = b.claim(&seat, &ids, &claim_id, now_ms());
            let changed = !held.is_empty();
            Ok((held, changed))
        })?;
        Ok(Response::new(mailbox_pb::SeatClaimResponse {
            claim_id,
            deliveries: held.into_iter().map(delivery_pb).collect(),
        }))
    }

    pub(crate) async fn seat_release(
        &self,
        request: Request<mailbox_pb::SeatReleaseRequest>,
    ) -> Result<Response<mailbox_pb::SeatAckResponse>, ClankieError> {
        let seat = self.control_seat(&request).await?.seat;
        let req = request.into_inner();
        let mut book = self.inner.book.lock().await;
        let released = self.change_book_when(&mut book, |b| {
            let released = b.release(&seat, &req.delivery_id, &req.claim_id);
            Ok((released, released))
        })?;
        if released {
            drop(book);
            self.inner.queued.send_modify(|n| *n += 1);
        }
        Ok(Response::new(mailbox_pb::SeatAckResponse {
            recorded: released,
        }))
    }
}
