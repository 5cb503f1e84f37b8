//! A seat's deliveries: the long poll (which also carries the seat's
//! catalog revision), claims, acks and releases, and the catalog-only
//! long poll.
//!
//! The mid-turn hold: a catalog change is published to a seat only once its
//! agent is not mid-turn (Herdr `working` or `blocked`), so a harness keeps
//! the tool list it started the turn with.

use std::time::Duration;

use clankie_proto::admission::v1 as admission_pb;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::ClankieError;
use clankie_runtime::clients::{Call, INTERNAL};
use clankie_types::fleet::seat::{self, Acked, CatalogAnswer, Claimed, PollAnswer, Released};

use super::{Budget, Op, unanswered, unreadable};
use crate::Shared;
use clankie_runtime::clients::Answer as _;

/// The longest wait a seat may ask for.
pub const MAX_WAIT: Duration = Duration::from_millis(clankie_types::fleet::seat::MAX_WAIT_MS);

/// How often a held change looks at the turn again.
const HOLD_CHECK: Duration = Duration::from_secs(5);

/// The most tool names a poll may say its bridge holds, and their length.
const MAX_TOOLS: usize = 64;
const MAX_TOOL_CHARS: usize = 128;

/// The revision a seat's catalog has: the connected catalog and the fleet
/// settings (tools and peer messages) together.
pub(crate) fn seat_revision(shared: &Shared) -> String {
    format!(
        "{}.{}",
        shared.catalog.borrow().revision,
        shared.settings.borrow().revision
    )
}

/// Waits until the seat revision differs from `known`, or `wait` passes.
async fn revision_change(shared: &Shared, known: &str, wait: Duration) -> String {
    let mut catalog = shared.catalog.subscribe();
    let mut settings = shared.settings.subscribe();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let now = seat_revision(shared);
        if now != known || tokio::time::Instant::now() >= deadline {
            return now;
        }
        tokio::select! {
            _ = catalog.changed() => {}
            _ = settings.changed() => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

impl Op<'_> {
    /// An operation whose budget stretches over a long poll of `wait`.
    pub(crate) fn polling<'a>(
        shared: &'a Shared,
        who: &'a crate::doors::Admitted,
        wait: Duration,
    ) -> Op<'a> {
        Op::within(shared, who, Budget::start(shared.request_budget + wait))
    }

    /// Whether the seat's agent is mid-turn (Herdr `working` or `blocked`).
    /// `unknown` means Herdr sees no agent in the pane: there is no turn
    /// to wait for. A status that cannot be read does not hold anything.
    async fn mid_turn(&self) -> bool {
        self.turn(None).await.0
    }

    /// [`Self::mid_turn`], and whether the connection's proof held in an
    /// observation begun at or after `since` (the machine's monotonic
    /// clock, which admission reads too), as admission says.
    async fn turn(&self, since: Option<u64>) -> (bool, bool) {
        let req = Call::new(admission_pb::SeatStatusRequest {
            ticket: self.who.ticket.clone(),
            held_since_monotonic_ns: since,
        })
        .timeout(INTERNAL)
        .request();
        match self.shared.admission.clone().seat_status(req).await {
            Ok(r) => {
                let r = r.into_inner();
                (
                    matches!(r.agent_status.as_str(), "working" | "blocked"),
                    r.held_since,
                )
            }
            Err(_) => (false, false),
        }
    }

    /// Waits for a changed seat revision, but holds a change while the
    /// seat is mid-turn. Returns `known` when nothing may be published
    /// within `wait`.
    async fn settled_revision(&self, known: &str, wait: Duration) -> String {
        self.settled_revision_held(known, wait, None).await.0
    }

    /// [`Self::settled_revision`], with what the last turn check said of
    /// the connection's proof since `since` ([`Self::turn`]).
    async fn settled_revision_held(
        &self,
        known: &str,
        wait: Duration,
        since: Option<u64>,
    ) -> (String, bool) {
        let shared = self.shared;
        // A bridge without a revision learns the current one at once.
        if known.is_empty() {
            return (seat_revision(shared), false);
        }
        let deadline = tokio::time::Instant::now() + wait;
        let revision = revision_change(shared, known, wait).await;
        if revision == known {
            return (revision, false);
        }
        loop {
            let (mid, held) = self.turn(since).await;
            if !mid {
                return (seat_revision(shared), held);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return (known.to_string(), false);
            }
            tokio::time::sleep(HOLD_CHECK.min(deadline - now)).await;
        }
    }

    /// The mailbox long poll: it ends on a delivery or on a published
    /// catalog change, whichever is first. `tools` are the tools the
    /// seat's bridge serves.
    pub(crate) async fn poll(
        &self,
        wait: Duration,
        known: String,
        tools: &str,
    ) -> Result<PollAnswer, ClankieError> {
        let tools = tools
            .split(',')
            .filter(|t| !t.is_empty())
            .take(MAX_TOOLS)
            .map(|t| t.chars().take(MAX_TOOL_CHARS).collect())
            .collect();
        let began = clankie_runtime::clock::monotonic_ns();
        let req = self.request(mailbox_pb::SeatPollRequest {
            wait_ms: wait.as_millis() as u32,
            tools,
        })?;
        let mut mailbox = self.shared.mailbox.clone();
        let poll = mailbox.seat_poll(req);
        // The seat's own tool families are read while it waits, so a change
        // wakes it with nothing left to ask.
        let changed = async {
            if known.is_empty() {
                return std::future::pending().await;
            }
            let ((revision, held), families) = tokio::join!(
                self.settled_revision_held(&known, wait, began),
                crate::listing::seat_families(self.shared, self.who)
            );
            if revision == known {
                // Held (or unchanged) to the end: let the poll answer.
                std::future::pending().await
            } else {
                (revision, held, families)
            }
        };
        tokio::select! {
            polled = poll => {
                let r = polled.verdict().map_err(unanswered)?;
                // A change still held by a running turn is not published.
                let mut revision = seat_revision(self.shared);
                if !known.is_empty() && revision != known && self.mid_turn().await {
                    revision = known.clone();
                }
                Ok(PollAnswer {
                    seat_id: Some(r.seat_id),
                    catalog_revision: revision,
                    deliveries: seat::deliveries(&r.deliveries).map_err(unreadable)?,
                    listing: None,
                })
            }
            (revision, held, families) = changed => {
                // The door did not recheck this poll: the mailbox's seat
                // observation does, and a change may end the wait before
                // that observation has answered. So this answer needs a
                // holding observation begun since the poll began: the
                // turn check just asked admission, and without one the
                // proof is rechecked now.
                if !held {
                    self.recheck().await?;
                }
                Ok(PollAnswer {
                    seat_id: None,
                    catalog_revision: revision,
                    deliveries: Vec::new(),
                    listing: crate::listing::at_revision(self.shared, self.who, families),
                })
            }
        }
    }

    /// The connection's proof, rechecked now (lineage and pane).
    async fn recheck(&self) -> Result<(), ClankieError> {
        let req = Call::new(admission_pb::RecheckRequest {
            ticket: self.who.ticket.clone(),
        })
        .timeout(INTERNAL)
        .request();
        self.shared
            .admission
            .clone()
            .recheck(req)
            .await
            .verdict()
            .map(|_| ())
            .map_err(unanswered)
    }

    /// The catalog-only long poll: never binds a seat in the mailbox; a
    /// published change reads the seat's tool families, as `tools/list`
    /// does.
    pub(crate) async fn catalog_revision(&self, wait: Duration, known: &str) -> CatalogAnswer {
        let revision = self.settled_revision(known, wait).await;
        // A published change carries its listing; the first answer does
        // not (the bridge lists once it knows a revision).
        let listing = if !known.is_empty() && revision != known {
            let families = crate::listing::seat_families(self.shared, self.who).await;
            crate::listing::at_revision(self.shared, self.who, families)
        } else {
            None
        };
        CatalogAnswer {
            catalog_revision: revision,
            listing,
        }
    }

    pub(crate) async fn claim(&self, delivery_ids: Vec<String>) -> Result<Claimed, ClankieError> {
        let req = self.request(mailbox_pb::SeatClaimRequest { delivery_ids })?;
        let r = self
            .shared
            .mailbox
            .clone()
            .seat_claim(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(Claimed {
            claim_id: r.claim_id,
            deliveries: seat::deliveries(&r.deliveries).map_err(unreadable)?,
        })
    }

    pub(crate) async fn ack(
        &self,
        delivery_id: String,
        claim_id: String,
    ) -> Result<Acked, ClankieError> {
        let req = self.request(mailbox_pb::SeatAckRequest {
            delivery_id,
            claim_id,
        })?;
        let r = self
            .shared
            .mailbox
            .clone()
            .seat_ack(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(Acked {
            recorded: r.recorded,
        })
    }

    pub(crate) async fn release(
        &self,
        delivery_id: String,
        claim_id: String,
    ) -> Result<Released, ClankieError> {
        let req = self.request(mailbox_pb::SeatReleaseRequest {
            delivery_id,
            claim_id,
        })?;
        let r = self
            .shared
            .mailbox
            .clone()
            .seat_release(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(Released {
            released: r.recorded,
        })
    }
}
