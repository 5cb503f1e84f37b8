//! Peer messages: the fleet's seats, a message to one of them, and its
//! receipt. The mailbox proves both seats; a sender sees no process facts
//! of other seats.

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::ClankieError;
use clankie_types::fleet::ReceiptId;
use clankie_types::fleet::outcome::{Lost, lost_after_forward};
use clankie_types::fleet::seat::{PeerList, PeerReceipt};
use serde::Serialize;

use super::{Op, unanswered, unreadable};
use clankie_runtime::clients::{Answer as _, Unanswered};

/// A sent peer message's answer.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Sent {
    Receipt(PeerReceipt),
    /// Forwarded, and no verdict came back: the message may be queued.
    Lost(Lost),
}

impl Op<'_> {
    /// `list_fleet_seats`.
    pub(crate) async fn peers(&self) -> Result<PeerList, ClankieError> {
        let req = self.request(mailbox_pb::ListPeersRequest {})?;
        let r = self
            .shared
            .mailbox
            .clone()
            .list_peers(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(PeerList {
            own: r.self_.as_ref().map(Into::into),
            seats: r.seats.iter().map(Into::into).collect(),
        })
    }

    /// `message_peer`, under a receipt id the caller fixed.
    pub(crate) async fn send_peer(
        &self,
        seat: String,
        text: String,
        receipt_id: String,
    ) -> Result<Sent, ClankieError> {
        ReceiptId::parse(&receipt_id)?;
        let req = self.request(mailbox_pb::SendPeerRequest {
            seat,
            text,
            receipt_id: receipt_id.clone(),
        })?;
        let reply = self.shared.mailbox.clone().send_peer(req).await;
        Ok(match reply.verdict() {
            Ok(r) => Sent::Receipt((&r).try_into().map_err(unreadable)?),
            Err(Unanswered::Verdict(e)) => return Err(e),
            Err(Unanswered::Lost(_)) => Sent::Lost(lost_after_forward(&receipt_id)),
        })
    }

    /// One peer message's receipt, as its sender reads it.
    pub(crate) async fn peer_receipt(
        &self,
        peer_message_id: String,
    ) -> Result<PeerReceipt, ClankieError> {
        let req = self.request(mailbox_pb::GetPeerReceiptRequest { peer_message_id })?;
        let r = self
            .shared
            .mailbox
            .clone()
            .get_peer_receipt(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        (&r).try_into().map_err(unreadable)
    }
}
