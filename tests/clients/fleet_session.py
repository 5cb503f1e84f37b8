"""Drives `clankie mcp --fleet` with the Python MCP SDK over stdio, as a
harness would, and prints one JSON object describing what it saw.

Usage: python fleet_session.py CLANKIE_BIN
Env:   CLANKIE_FLEET_URL, CLANKIE_FLEET_TOKEN (passed through to the bridge)
"""
import json
import os
import sys

import anyio
import mcp.types as types
from mcp import ClientSession, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge  # noqa: E402


async def main() -> None:
    clankie = sys.argv[1]
    changed = anyio.Event()
    seen = {"list_changed": 0}

    async def on_message(msg) -> None:
        if isinstance(msg, types.ToolListChangedNotification):
            seen["list_changed"] += 1
            changed.set()

    params = bridge.fleet(clankie)
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as s:
            init = await s.initialize()
            out["server"] = init.server_info.name
            tools = await s.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)

            r = await s.call_tool("clankie_tools", {"query": "sleep"})
            out["search"] = [t["name"] for t in bridge.envelope(r)["tools"]]

            r = await s.call_tool(
                "clankie_call",
                {"name": "edge_slow", "arguments": {"seconds": 0, "tag": "py-1"}},
            )
            first = bridge.envelope(r)
            out["call"] = {"outcome": first["outcome"], "receiptId": first["receiptId"]}

            r = await s.call_tool("clankie_call", {"receiptId": first["receiptId"]})
            out["reconcile"] = {
                "outcome": bridge.envelope(r)["outcome"],
                "fromReceipt": bridge.envelope(r)["fromReceipt"],
            }

            r = await s.call_tool(
                "clankie_call", {"name": "edge_add_tool", "arguments": {"name": "fresh"}}
            )
            out["add_tool"] = bridge.envelope(r)["outcome"]
            with anyio.move_on_after(20):
                await changed.wait()
            out["list_changed"] = seen["list_changed"]

            r = await s.call_tool("clankie_tools", {"query": "fresh"})
            out["after"] = [t["name"] for t in bridge.envelope(r)["tools"]]

            r = await s.call_tool("clankie_call", {"name": "edge_nope", "arguments": {}})
            out["unknown"] = {
                "isError": r.is_error,
                "code": (bridge.envelope(r) or {}).get("error", {}).get("code"),
            }
    print(json.dumps(out))


anyio.run(main)
