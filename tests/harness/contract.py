"""The member-facing seat routes, read from the golden fixture the Rust
contract is tested against (types/fixtures/fleet/seat.json, written from
`clankie_types::fleet::SeatRoute`), so a Python client never spells a path
of its own.
"""
import json
import pathlib
import urllib.parse

SEAT = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "types/fixtures/fleet/seat.json").read_text()
)


def seat_path(route: str, pane: str, id: str = "") -> str:
    """The path of seat route `route` (a `SeatRoute` name such as
    "ToolCatalog") for `pane`, percent-encoded, and `id` where the route
    names one."""
    path = SEAT["routes"][route]["path"]
    path = path.replace("{pane}", urllib.parse.quote(pane, safe=""))
    return path.replace("{id}", urllib.parse.quote(id, safe=""))


def seat_method(route: str) -> str:
    return SEAT["routes"][route]["method"]
