//! What a member lists: the meta tools while connected tools are on, and
//! for a seat its report, peer, review and lead tools. Served to
//! `tools/list`, and carried by a seat's long poll that ends on a catalog
//! change, built from the gateway's copy of the catalog at that revision
//! (`Shared::catalog`), so a hundred parked bridges are told from one
//! broadcast without each listing again through a fresh proof.

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::clients::{Call, INTERNAL};
use clankie_types::fleet::catalog::{CatalogSettings, Switch};
use serde_json::{Value, json};

use super::definitions::*;
use crate::Shared;
use crate::doors::Admitted;

/// A member's listing, and whether the seat's own tools (review, lead)
/// were read: when the mailbox does not answer they are left out.
pub(crate) struct Listed {
    pub(crate) listing: Value,
    pub(crate) seat_known: bool,
}

/// What `a` lists with connected tools `tools_on`, at catalog `info`.
pub(crate) async fn listing(
    shared: &Shared,
    a: &Admitted,
    tools_on: bool,
    info: &mcphost_pb::CatalogInfo,
) -> Listed {
    let mut tools = if tools_on {
        tool_definitions(&info.connected, info.revision)
    } else {
        Vec::new()
    };
    // The settings it is served under go with it, so a bridge can drop a
    // family they switch off (`fleet::catalog`).
    let mut settings = CatalogSettings {
        tools: tools_on.into(),
        peer_messages: Switch::Off,
        reviews: Switch::Off,
    };
    let mut seat_known = true;
    // Reports are the seat's own channel, apart from fleet.tools.
    if a.is_seat() {
        tools.push(report_definition());
        if shared.settings.borrow().peer_messages {
            tools.extend(peer_definitions());
            settings.peer_messages = Switch::On;
        }
        // Review tools only when the seat's project has a standing
        // reviewer (and the mailbox answers).
        let req = Call::new(clankie_proto::mailbox::v1::SeatToolsRequest {})
            .timeout(INTERNAL)
            .ticket(&a.ticket)
            .request();
        match shared.mailbox.clone().seat_tools(req).await {
            Ok(seat) => {
                let seat = seat.into_inner();
                if seat.reviews {
                    tools.extend(review_definitions());
                    settings.reviews = Switch::On;
                }
                if seat.lead {
                    tools.extend(lead_definitions());
                }
            }
            Err(_) => seat_known = false,
        }
    }
    let mut meta = serde_json::Map::new();
    settings.write(&mut meta);
    Listed {
        listing: json!({ "tools": tools, "_meta": meta }),
        seat_known,
    }
}

/// The listing a seat's poll carries at the revision it ends on: the
/// settings and catalog the gateway holds now. None when the seat's own
/// tools could not be read; its bridge then lists.
pub(crate) async fn at_revision(
    shared: &Shared,
    a: &Admitted,
) -> Option<clankie_types::fleet::seat::Listing> {
    let tools_on = crate::doors::tools_on(Some(&shared.settings.borrow()));
    let info = shared.catalog.borrow().clone();
    let listed = listing(shared, a, tools_on, &info).await;
    listed
        .seat_known
        .then_some(clankie_types::fleet::seat::Listing(listed.listing))
}
