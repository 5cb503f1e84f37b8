//! The seat routes: the HTTP paths a seat's bridge reads its mailbox and
//! peer messages on, the bodies it sends, and the answers it reads. The
//! gateway writes these; the CLI bridge, the Pi extension and the test
//! harnesses read them.
//!
//! Every path names the seat's pane, and the gateway answers only the
//! connection proven for that pane.

use serde::{Deserialize, Serialize};

use clankie_proto::mailbox::v1 as mailbox_pb;

use super::DeliveryKind;
use crate::peer::{PeerMessageState, PeerOutcome};

/// A mailbox answer with a closed-set field left unspecified (a build that
/// does not match the mailbox's): nothing is guessed for it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the mailbox sent a {0} this build does not know")]
pub struct Unspecified(pub &'static str);

/// One seat route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatRoute {
    /// `GET`: the long poll for deliveries (and the catalog revision).
    Mailbox,
    /// `POST` [`Claim`]: take deliveries to show.
    Claim,
    /// `POST` [`DeliveryRef`]: a claimed delivery was shown.
    Ack,
    /// `POST` [`DeliveryRef`]: a claimed delivery goes back to the queue.
    Release,
    /// `GET`: the catalog-only long poll.
    ToolCatalog,
    /// `GET`: the fleet's seats.
    Peers,
    /// `POST` [`SendPeer`]: message another seat.
    PeerMessages,
    /// `GET`: one peer message's receipt (`{id}`).
    PeerMessage,
    /// `GET`: the seat's own report (`message_clankie`) by receipt id
    /// (`{id}`): a lookup that never sends.
    Report,
    /// `POST`: hand a change to the landing review.
    ReviewCandidates,
    /// `GET`: one review candidate (`{id}`).
    ReviewCandidate,
    /// `POST`: a reviewer's verdict.
    ReviewVerdicts,
}

impl SeatRoute {
    pub const ALL: [SeatRoute; 12] = [
        SeatRoute::Mailbox,
        SeatRoute::Claim,
        SeatRoute::Ack,
        SeatRoute::Release,
        SeatRoute::ToolCatalog,
        SeatRoute::Peers,
        SeatRoute::PeerMessages,
        SeatRoute::PeerMessage,
        SeatRoute::Report,
        SeatRoute::ReviewCandidates,
        SeatRoute::ReviewCandidate,
        SeatRoute::ReviewVerdicts,
    ];

    /// The part after `/v1/fleet/seats/{pane}`.
    pub const fn tail(self) -> &'static str {
        match self {
            SeatRoute::Mailbox => "/mailbox",
            SeatRoute::Claim => "/mailbox/claim",
            SeatRoute::Ack => "/mailbox/ack",
            SeatRoute::Release => "/mailbox/release",
            SeatRoute::ToolCatalog => "/tool-catalog",
            SeatRoute::Peers => "/peers",
            SeatRoute::PeerMessages => "/peer-messages",
            SeatRoute::PeerMessage => "/peer-messages/{id}",
            SeatRoute::Report => "/reports/{id}",
            SeatRoute::ReviewCandidates => "/review-candidates",
            SeatRoute::ReviewCandidate => "/review-candidates/{id}",
            SeatRoute::ReviewVerdicts => "/review-verdicts",
        }
    }

    /// Whether the route takes a JSON body.
    pub const fn posts(self) -> bool {
        matches!(
            self,
            SeatRoute::Claim
                | SeatRoute::Ack
                | SeatRoute::Release
                | SeatRoute::PeerMessages
                | SeatRoute::ReviewCandidates
                | SeatRoute::ReviewVerdicts
        )
    }

    /// The route as a router names it, with `{pane}` (and `{id}`) holes.
    pub fn template(self) -> String {
        format!("{SEATS}/{{pane}}{}", self.tail())
    }

    /// The path for `pane`, which the caller has already percent-encoded;
    /// an `{id}` hole stays for the caller to fill.
    pub fn path(self, encoded_pane: &str) -> String {
        format!("{SEATS}/{encoded_pane}{}", self.tail())
    }
}

/// Where every seat route lives.
pub const SEATS: &str = "/v1/fleet/seats";

/// The longest wait a seat's long poll may ask for, in milliseconds.
pub const MAX_WAIT_MS: u64 = 25_000;

/// One message waiting for a seat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub delivery_id: String,
    pub kind: DeliveryKind,
    /// `seat:ID` for a peer, `conversation:ID` for a lead.
    pub from: String,
    pub text: String,
    pub created_at_ms: i64,
    /// For peer messages: the peer message id.
    pub peer_message_id: String,
    /// The earlier unconfirmed message this one follows, if any.
    pub follows: String,
}

impl TryFrom<&mailbox_pb::Delivery> for Delivery {
    type Error = Unspecified;

    fn try_from(d: &mailbox_pb::Delivery) -> Result<Self, Unspecified> {
        Ok(Delivery {
            delivery_id: d.delivery_id.clone(),
            kind: DeliveryKind::from_wire(d.kind).ok_or(Unspecified("delivery kind"))?,
            from: d.from.clone(),
            text: d.text.clone(),
            created_at_ms: d.created_at_ms,
            peer_message_id: d.peer_message_id.clone(),
            follows: d.follows.clone(),
        })
    }
}

/// Every delivery of a mailbox answer, or the first it cannot read.
pub fn deliveries(ds: &[mailbox_pb::Delivery]) -> Result<Vec<Delivery>, Unspecified> {
    ds.iter().map(Delivery::try_from).collect()
}

/// The mailbox long poll's answer. A poll ended by a catalog change names
/// no seat and carries no deliveries, but usually the new listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    pub catalog_revision: String,
    pub deliveries: Vec<Delivery>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<Listing>,
}

/// The catalog-only long poll's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAnswer {
    pub catalog_revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<Listing>,
}

/// What the member lists at a poll's new revision, exactly as its
/// `tools/list` would answer (`tools`, and `_meta` with the settings they
/// are served under). A poll that ends on a catalog change carries it, so
/// a parked bridge is told without listing again; without it (the seat's
/// own tools could not be read) the bridge lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listing(pub serde_json::Value);

/// `POST …/mailbox/claim`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Claim {
    pub delivery_ids: Vec<String>,
}

/// The deliveries a claim took, under one claim id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claimed {
    pub claim_id: String,
    pub deliveries: Vec<Delivery>,
}

/// `POST …/mailbox/ack` and `…/mailbox/release`: one claimed delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeliveryRef {
    pub delivery_id: String,
    pub claim_id: String,
}

/// The answer to an ack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acked {
    pub recorded: bool,
}

/// The answer to a release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Released {
    pub released: bool,
}

/// A seat as a sender needs it to address the seat: no process facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeatView {
    pub seat_id: String,
    pub fleet: String,
    pub pane_id: String,
    pub link_id: String,
    pub hire_id: String,
    pub role: String,
    pub project_id: String,
    pub reachable: bool,
}

impl From<&mailbox_pb::Seat> for SeatView {
    fn from(s: &mailbox_pb::Seat) -> Self {
        SeatView {
            seat_id: s.seat_id.clone(),
            fleet: s.fleet.clone(),
            pane_id: s.pane_id.clone(),
            link_id: s.link_id.clone(),
            hire_id: s.hire_id.clone(),
            role: crate::Role::wire_word(s.role).to_string(),
            project_id: s.project_id.clone(),
            reachable: s.reachable,
        }
    }
}

/// The caller's own seat, with the agent it is bound to: facts about its
/// own pane's processes, which it could read from `/proc` anyway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnSeat {
    #[serde(flatten)]
    pub seat: SeatView,
    pub binding: Binding,
}

/// The agent a seat is bound to. The 64-bit numbers travel as strings, so
/// a JavaScript reader keeps every digit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    pub agent_pid: i32,
    pub agent_pidfs_id: String,
    pub agent_start_time: String,
    pub agent_executable: String,
}

impl From<&mailbox_pb::Seat> for OwnSeat {
    fn from(s: &mailbox_pb::Seat) -> Self {
        OwnSeat {
            seat: s.into(),
            binding: Binding {
                agent_pid: s.agent_pid,
                agent_pidfs_id: s.agent_pidfs_id.to_string(),
                agent_start_time: s.agent_start_time.to_string(),
                agent_executable: s.agent_executable.clone(),
            },
        }
    }
}

/// `list_fleet_seats` and `GET …/peers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerList {
    #[serde(rename = "self")]
    pub own: Option<OwnSeat>,
    pub seats: Vec<SeatView>,
}

/// `POST …/peer-messages`. (The MCP tool `message_peer` takes the same
/// fields, its receipt id optional.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SendPeer {
    pub seat: String,
    pub text: String,
    pub receipt_id: String,
}

/// A peer message's receipt, as its sender reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerReceipt {
    pub peer_message_id: String,
    pub receipt_id: String,
    pub sender_seat: String,
    pub recipient_seat: String,
    pub state: PeerMessageState,
    /// Confirmed only by a native delivery receipt.
    pub outcome: PeerOutcome,
    pub created_at_ms: i64,
    /// True when this call read an existing receipt and sent nothing.
    pub original: bool,
    /// Absent once pruned from an old settled receipt.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub settled_at_ms: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub follows: String,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl TryFrom<&mailbox_pb::PeerReceipt> for PeerReceipt {
    type Error = Unspecified;

    fn try_from(r: &mailbox_pb::PeerReceipt) -> Result<Self, Unspecified> {
        Ok(PeerReceipt {
            peer_message_id: r.peer_message_id.clone(),
            receipt_id: r.receipt_id.clone(),
            sender_seat: r.sender_seat.clone(),
            recipient_seat: r.recipient_seat.clone(),
            state: PeerMessageState::from_wire(r.state).ok_or(Unspecified("peer message state"))?,
            outcome: PeerOutcome::from_wire(r.outcome).ok_or(Unspecified("peer outcome"))?,
            created_at_ms: r.created_at_ms,
            original: r.original,
            text: r.text.clone(),
            settled_at_ms: r.settled_at_ms,
            follows: r.follows.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_golden_seat_answers_read_and_write_back_the_same() {
        let f = super::super::fixture("seat.json");
        let poll: PollAnswer = serde_json::from_value(f["poll"].clone()).expect("poll");
        assert_eq!(serde_json::to_value(&poll).expect("json"), f["poll"]);
        let changed: PollAnswer = serde_json::from_value(f["pollChanged"].clone()).expect("poll");
        assert_eq!(changed.seat_id, None);
        let served = changed
            .listing
            .as_ref()
            .and_then(|l| l.0["_meta"].as_object())
            .and_then(crate::fleet::catalog::CatalogSettings::read);
        assert!(served.is_some(), "a carried listing names its settings");
        assert_eq!(
            serde_json::to_value(&changed).expect("json"),
            f["pollChanged"]
        );
        let peers: PeerList = serde_json::from_value(f["peers"].clone()).expect("peers");
        assert_eq!(serde_json::to_value(&peers).expect("json"), f["peers"]);
        let receipt: PeerReceipt = serde_json::from_value(f["receipt"].clone()).expect("receipt");
        assert_eq!(serde_json::to_value(&receipt).expect("json"), f["receipt"]);
        let claimed: Claimed = serde_json::from_value(f["claimed"].clone()).expect("claimed");
        assert_eq!(serde_json::to_value(&claimed).expect("json"), f["claimed"]);
    }

    #[test]
    fn the_golden_routes_are_the_ones_served() {
        let f = super::super::fixture("seat.json");
        let routes = f["routes"].as_object().expect("routes");
        assert_eq!(routes.len(), SeatRoute::ALL.len());
        for r in SeatRoute::ALL {
            let want = &routes[&format!("{r:?}")];
            assert_eq!(want["path"], r.template());
            assert_eq!(want["method"], if r.posts() { "POST" } else { "GET" });
        }
    }

    #[test]
    fn an_unspecified_kind_or_state_is_refused_never_guessed() {
        let d = mailbox_pb::Delivery::default();
        assert_eq!(Delivery::try_from(&d), Err(Unspecified("delivery kind")));
        let ok = mailbox_pb::Delivery {
            kind: DeliveryKind::Wake.wire(),
            ..Default::default()
        };
        assert_eq!(
            Delivery::try_from(&ok).map(|d| d.kind),
            Ok(DeliveryKind::Wake)
        );
        let r = mailbox_pb::PeerReceipt {
            state: PeerMessageState::Delivered.wire(),
            ..Default::default()
        };
        assert_eq!(PeerReceipt::try_from(&r), Err(Unspecified("peer outcome")));
    }

    #[test]
    fn a_body_with_a_field_it_does_not_know_is_refused() {
        let bad = serde_json::json!({"deliveryId": "d", "claimId": "c", "extra": 1});
        assert!(serde_json::from_value::<DeliveryRef>(bad).is_err());
    }
}
