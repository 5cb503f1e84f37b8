"""A hired seat's harness, driven through files by a test.

Runs `clankie mcp --fleet` (no token), records every channel notification
the bridge hands it (`notifications/claude/channel`) in DIR/NAME.inbox, one
JSON object per line, and executes commands the test drops in
DIR/NAME.cmd.N (JSON {"tool", "args"} for an MCP tool call through the bridge,
with "raw": true straight to the gateway instead, or {"http":
[METHOD, PATH, BODY], "headers": {...}} for a request on the gateway's
local Unix socket),
writing each answer to DIR/NAME.res.N. Its own seat id goes to DIR/NAME.seat.

Usage: python peer_seat.py CLANKIE_BIN DIR NAME
"""
import json
import os
import sys

import anyio
from mcp import ClientSession, stdio_client
from mcp.client.extension import NotificationBinding
from pydantic import BaseModel, ConfigDict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge, discovery  # noqa: E402
from harness.seat_files import SeatFiles  # noqa: E402
from harness.unix_http import UnixHTTP, pane_target, request_json  # noqa: E402


class Channel(BaseModel):
    model_config = ConfigDict(extra="allow")
    content: str
    meta: dict = {}


clankie, folder, name = sys.argv[1], sys.argv[2], sys.argv[3]


files = SeatFiles(folder, name)


def do_http(method: str, target: str, body, headers=None) -> dict:
    # A hire is told where the discovery file is, not where the state is.
    conn = UnixHTTP(discovery.gateway()["unix"])
    return request_json(conn, method, pane_target(target), body, headers)


async def raw_tool(tool: str, args: dict) -> dict:
    """One tool call straight to the gateway's MCP endpoint on its local
    socket, from this process (no bridge: nothing chooses or looks up a
    receipt id for it)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    transport = httpx2.AsyncHTTPTransport(uds=discovery.gateway()["unix"])
    async with httpx2.AsyncClient(transport=transport, timeout=60) as http:
        async with streamable_http_client("http://localhost/mcp", http_client=http) as (r, w, *_):
            async with ClientSession(r, w) as raw:
                await raw.initialize()
                return bridge.outcome(await raw.call_tool(tool, args))


async def on_channel(params: Channel) -> None:
    with open(files.path("inbox"), "a") as f:
        f.write(json.dumps({"content": params.content, "meta": params.meta}) + "\n")


async def main() -> None:
    params = bridge.fleet(clankie)
    binding = NotificationBinding(
        method="notifications/claude/channel", params_type=Channel, handler=on_channel
    )
    async with stdio_client(params) as (read, write_stream):
        async with ClientSession(read, write_stream, notification_bindings=[binding]) as s:
            await s.initialize()
            # Wait until this seat is known (its bridge has polled once).
            while True:
                r = await s.call_tool("list_fleet_seats", {})
                me = (r.structured_content or {}).get("self") or {}
                if not r.is_error and me.get("reachable"):
                    files.write("seat", me)
                    break
                # Not a seat (yet): what it was told, for tests that expect a refusal.
                files.write("last", bridge.outcome(r))
                await anyio.sleep(0.2)
            async def answer(_n: int, c: dict) -> dict:
                if c.get("list"):
                    tools = await s.list_tools()
                    return {"tools": sorted(t.name for t in tools.tools), "meta": tools.meta}
                if "http" in c:
                    method, target, body = c["http"]
                    headers = c.get("headers")
                    return await anyio.to_thread.run_sync(do_http, method, target, body, headers)
                if c.get("raw"):
                    return await raw_tool(c["tool"], c.get("args", {}))
                return bridge.outcome(await s.call_tool(c["tool"], c.get("args", {})))

            await files.serve(answer)

anyio.run(main)
