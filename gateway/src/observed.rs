//! The requests whose seat the mailbox proves fresh before they do or tell
//! anything: on these, a local door need not recheck its connection's
//! proof as well.
//!
//! Each is answered only by one mailbox RPC that starts with the native
//! seat observation (admission's `ObserveTicketSeat`): the ticket's proof
//! rechecked, and the pane's seat observed, in one bracket. Before that
//! RPC the gateway only parses the request and holds the path's pane to the
//! proven one, so a stale proof reaches nothing: the observation refuses,
//! admission drops the ticket, and the connection's next request finds no
//! ticket at its door and is proven again in full.
//!
//! The mailbox long poll is here too. Its wait starts with the mailbox's
//! seat observation, and an answer that a catalog change ends before the
//! mailbox answered is rechecked on its own before it is sent
//! (`fleet::deliveries`). An idle seat re-polls every 25 s, so this halves
//! the proofs a parked fleet costs.
//!
//! Not here, on purpose: the catalog-only poll, reports and reviews (they
//! read or write before, or without, a seat observation), and every other
//! MCP request.

use clankie_types::fleet::FleetTool;
use clankie_types::fleet::seat::{SEATS, SeatRoute};
use serde::Deserialize;

/// Whether the request (`method`, `path`, and a POST's `body`) is one the
/// mailbox proves again by itself.
pub(crate) fn by_mailbox(method: &http::Method, path: &str, body: &[u8]) -> bool {
    if path == "/mcp" {
        return method == http::Method::POST
            && tool_called(body)
                .is_some_and(|t| t == FleetTool::Peer.name() || t == FleetTool::Peers.name());
    }
    let Some(route) = seat_route(path) else {
        return false;
    };
    let posts = method == http::Method::POST;
    match route {
        SeatRoute::Claim | SeatRoute::Ack | SeatRoute::Release | SeatRoute::PeerMessages => posts,
        SeatRoute::Peers | SeatRoute::PeerMessage | SeatRoute::Mailbox => {
            method == http::Method::GET
        }
        _ => false,
    }
}

/// The seat route a path names exactly as the router matches it:
/// `{SEATS}/{pane}{tail}`, with one segment for `{id}`.
fn seat_route(path: &str) -> Option<SeatRoute> {
    let rest = path.strip_prefix(SEATS)?.strip_prefix('/')?;
    let (pane, tail) = rest.split_at(rest.find('/')?);
    if pane.is_empty() {
        return None;
    }
    SeatRoute::ALL
        .into_iter()
        .find(|r| match r.tail().strip_suffix("/{id}") {
            Some(base) => tail
                .strip_prefix(base)
                .and_then(|t| t.strip_prefix('/'))
                .is_some_and(|id| !id.is_empty() && !id.contains('/')),
            None => tail == r.tail(),
        })
}

#[derive(Deserialize)]
struct Called<'a> {
    #[serde(borrow, default)]
    method: Option<&'a str>,
    #[serde(borrow, default)]
    params: Option<CalledParams<'a>>,
}

#[derive(Deserialize)]
struct CalledParams<'a> {
    #[serde(borrow, default)]
    name: Option<&'a str>,
}

/// The tool a `tools/call` message names. Anything this cannot read
/// plainly (params that are not an object, an escaped name) is no tool:
/// such a request keeps the door's recheck.
fn tool_called(body: &[u8]) -> Option<&str> {
    let called: Called<'_> = serde_json::from_slice(body).ok()?;
    (called.method == Some("tools/call"))
        .then_some(called.params?.name)
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn only_the_mailbox_proven_routes_skip_the_door_recheck() {
        let seat = |tail: &str| format!("{SEATS}/%253{tail}");
        assert!(by_mailbox(&Method::POST, &seat("/mailbox/claim"), b""));
        assert!(by_mailbox(&Method::POST, &seat("/mailbox/ack"), b""));
        assert!(by_mailbox(&Method::POST, &seat("/peer-messages"), b""));
        assert!(by_mailbox(&Method::GET, &seat("/peer-messages/pm-1"), b""));
        assert!(by_mailbox(&Method::GET, &seat("/peers"), b""));
        assert!(by_mailbox(&Method::GET, &seat("/mailbox"), b""));
        // The catalog-only poll, reviews, reports and near misses keep it.
        assert!(!by_mailbox(&Method::POST, &seat("/mailbox"), b""));
        assert!(!by_mailbox(&Method::GET, &seat("/tool-catalog"), b""));
        assert!(!by_mailbox(&Method::GET, &seat("/reports/r-1"), b""));
        assert!(!by_mailbox(&Method::POST, &seat("/review-verdicts"), b""));
        assert!(!by_mailbox(&Method::GET, &seat("/mailbox/claim"), b""));
        assert!(!by_mailbox(&Method::POST, &seat("/mailbox/claim/"), b""));
        assert!(!by_mailbox(&Method::POST, &seat("/x/mailbox/claim"), b""));
        assert!(!by_mailbox(&Method::GET, &seat("/peer-messages/a/b"), b""));
        assert!(!by_mailbox(&Method::GET, &seat("/peer-messages/"), b""));
        assert!(!by_mailbox(
            &Method::POST,
            &format!("{SEATS}//mailbox/claim"),
            b""
        ));
    }

    #[test]
    fn only_the_peer_tools_on_mcp_skip_it() {
        let call = |name: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
            )
        };
        assert!(by_mailbox(
            &Method::POST,
            "/mcp",
            call("message_peer").as_bytes()
        ));
        assert!(by_mailbox(
            &Method::POST,
            "/mcp",
            call("list_fleet_seats").as_bytes()
        ));
        assert!(!by_mailbox(
            &Method::POST,
            "/mcp",
            call("clankie_call").as_bytes()
        ));
        assert!(!by_mailbox(
            &Method::POST,
            "/mcp",
            call("message_clankie").as_bytes()
        ));
        // An escaped name is not read as one.
        assert!(!by_mailbox(
            &Method::POST,
            "/mcp",
            call(r"message\u005fpeer").as_bytes()
        ));
        assert!(!by_mailbox(
            &Method::POST,
            "/mcp",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!by_mailbox(
            &Method::POST,
            "/mcp",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#
        ));
        assert!(!by_mailbox(
            &Method::GET,
            "/mcp",
            call("message_peer").as_bytes()
        ));
        assert!(!by_mailbox(
            &Method::POST,
            "/mcp/",
            call("message_peer").as_bytes()
        ));
    }
}
