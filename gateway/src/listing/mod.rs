//! What a member lists: the meta tools while connected tools are on, and
//! for a seat its report, peer, review and lead tools. Served to
//! `tools/list`, and carried by a seat's long poll that ends on a catalog
//! change, built from the gateway's copy of the catalog at that revision
//! (`Shared::catalog`), so a hundred parked bridges are told from one
//! broadcast without each listing again through a fresh proof.

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::clients::{Call, INTERNAL};
use clankie_types::fleet::catalog::{CatalogSettings, Switch};
use clankie_types::fleet::seat::Listing;
use serde_json::{Value, json};

mod definitions;

use crate::Shared;
use crate::doors::Admitted;
use definitions::*;

/// A seat's own tool families: review (its project names a standing
/// reviewer) and lead (it holds a lead hire).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SeatFamilies {
    reviews: bool,
    lead: bool,
}

/// What the mailbox says of `a`'s own families; None when `a` is no seat
/// or the mailbox does not answer.
pub(crate) async fn seat_families(shared: &Shared, a: &Admitted) -> Option<SeatFamilies> {
    if !a.is_seat() {
        return None;
    }
    let req = Call::new(clankie_proto::mailbox::v1::SeatToolsRequest {})
        .timeout(INTERNAL)
        .ticket(&a.ticket)
        .request();
    let seat = shared.mailbox.clone().seat_tools(req).await.ok()?;
    let seat = seat.into_inner();
    Some(SeatFamilies {
        reviews: seat.reviews,
        lead: seat.lead,
    })
}

/// What `a` lists with connected tools `tools_on`, at catalog `info`; a
/// seat's review and lead tools as `families` says (none when unknown).
pub(crate) fn listing(
    shared: &Shared,
    a: &Admitted,
    tools_on: bool,
    info: &mcphost_pb::CatalogInfo,
    families: Option<SeatFamilies>,
) -> Value {
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
    // Reports are the seat's own channel, apart from fleet.tools.
    if a.is_seat() {
        tools.push(report_definition());
        if shared.settings.borrow().peer_messages {
            tools.extend(peer_definitions());
            settings.peer_messages = Switch::On;
        }
        let families = families.unwrap_or_default();
        if families.reviews {
            tools.extend(review_definitions());
            settings.reviews = Switch::On;
        }
        if families.lead {
            tools.extend(lead_definitions());
        }
    }
    let mut meta = serde_json::Map::new();
    settings.write(&mut meta);
    json!({ "tools": tools, "_meta": meta })
}

/// The listing a seat's poll carries at the revision it ends on: the
/// settings and catalog the gateway holds now, and the seat's families as
/// read when the poll began (they change with hires, not with the catalog).
/// None when those could not be read; its bridge then lists.
pub(crate) fn at_revision(
    shared: &Shared,
    a: &Admitted,
    families: Option<SeatFamilies>,
) -> Option<Listing> {
    let families = families?;
    let tools_on = crate::doors::tools_on(Some(&shared.settings.borrow()));
    let info = shared.catalog.borrow().clone();
    Some(Listing(listing(shared, a, tools_on, &info, Some(families))))
}
