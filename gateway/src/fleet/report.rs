//! `message_clankie`: a seat's report to the lead that hired it. The
//! mailbox decides the recipient from the seat's proof; the caller cannot
//! name one.

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::clients::{Answer as _, Unanswered};
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::args::ReportArgs;
use clankie_types::fleet::outcome::{Lost, lost_after_forward};
use clankie_types::fleet::{ReceiptId, ReceiptKind};
use clankie_types::transcript::{EntryKind, ReportState};
use serde::Serialize;

use super::{Op, with_receipt};

/// A report's answer.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Reported {
    /// In the lead's transcript (or already there under this receipt id).
    #[serde(rename_all = "camelCase")]
    Delivered {
        receipt_id: String,
        delivered: bool,
        replayed: bool,
    },
    /// Forwarded, and no verdict came back.
    Lost(Lost),
}

/// A report's lookup: where it stands. Nothing is sent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReportLookup {
    receipt_id: String,
    /// `accepted`, `not_delivered` (sealed: never sent again) or
    /// `unresolved`.
    state: &'static str,
    delivered: bool,
}

impl Op<'_> {
    /// The seat's own report by receipt id: read, never sent.
    pub(crate) async fn report_receipt(
        &self,
        receipt_id: String,
    ) -> Result<ReportLookup, ClankieError> {
        if !self.who.is_seat() {
            return Err(ErrorCode::LocalProcessMembershipRequired
                .err("a report lookup needs a seat in a linked pane"));
        }
        let receipt_id = ReceiptId::parse(&receipt_id)?.into_string();
        let req = self.request(mailbox_pb::ReportReceiptRequest { receipt_id })?;
        let r = self
            .shared
            .mailbox
            .clone()
            .report_receipt(req)
            .await
            .verdict()
            .map_err(super::unanswered)?;
        let state = ReportState::from_wire(r.state).ok_or_else(|| {
            super::unreadable(clankie_types::fleet::seat::Unspecified("report state"))
        })?;
        Ok(ReportLookup {
            receipt_id: r.receipt_id,
            state: state.as_str(),
            delivered: state == ReportState::Accepted,
        })
    }

    pub(crate) async fn report(&self, args: ReportArgs) -> Result<Reported, ClankieError> {
        if !self.who.is_seat() {
            return Err(ErrorCode::LocalProcessMembershipRequired
                .err("message_clankie needs a seat in a linked pane"));
        }
        let receipt_id = ReceiptId::given_or_mint(args.receipt_id.as_deref(), ReceiptKind::Report)?
            .into_string();
        let req = self.request(mailbox_pb::ReportRequest {
            receipt_id: receipt_id.clone(),
            text: args.text,
            kind: EntryKind::Message.wire(),
        })?;
        let reply = self.shared.mailbox.clone().report(req).await;
        Ok(match reply.verdict() {
            Ok(r) => Reported::Delivered {
                receipt_id: r.receipt_id,
                delivered: true,
                replayed: r.replayed,
            },
            Err(Unanswered::Verdict(e)) => return Err(with_receipt(e, &receipt_id)),
            Err(Unanswered::Lost(_)) => Reported::Lost(lost_after_forward(&receipt_id)),
        })
    }
}
