"""Holds a channel-less fleet bridge (`clankie mcp --fleet --no-channel`,
as a harness that reads its deliveries itself starts it; with
BRIDGE_WATCH_CHANNEL=1 in the environment, one with its seat channel) with
the Python MCP SDK over stdio, and writes what it lists: once at the start, then after
every `notifications/tools/list_changed` it hears. Runs until killed.

Usage: python bridge_watch.py CLANKIE_BIN OUT [AGAIN]
OUT gets one JSON line per listing: {"event": "listed"|"changed", "tools": [...]}.
With AGAIN, the harness also lists once more when that file appears, as a
harness asks on its own: {"event": "again", "tools": [...]} or
{"event": "again", "error": "..."}. The bridge's stderr goes to OUT.err.
"""
import json
import os
import sys

import anyio
import mcp.types as types
from mcp import ClientSession, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge  # noqa: E402


def note(out: str, event: str, tools) -> None:
    with open(out, "a") as f:
        f.write(json.dumps({"event": event, "tools": sorted(t.name for t in tools)}) + "\n")


async def again(s: ClientSession, out: str, trigger: str) -> None:
    while not os.path.exists(trigger):
        await anyio.sleep(0.05)
    try:
        note(out, "again", (await s.list_tools()).tools)
    except Exception as e:  # noqa: BLE001 - the refusal is what is written
        with open(out, "a") as f:
            f.write(json.dumps({"event": "again", "error": str(e)}) + "\n")


async def main() -> None:
    clankie, out = sys.argv[1], sys.argv[2]
    trigger = sys.argv[3] if len(sys.argv) > 3 else None
    changed = anyio.Event()

    async def on_message(msg) -> None:
        # The SDK hands a notification over bare or in its root model.
        if isinstance(getattr(msg, "root", msg), types.ToolListChangedNotification):
            changed.set()

    # The bridge's own log lines go to OUT.err, for a test to read.
    errlog = open(out + ".err", "w")
    extra = () if os.environ.get("BRIDGE_WATCH_CHANNEL") == "1" else ("--no-channel",)
    async with stdio_client(bridge.fleet(clankie, *extra), errlog=errlog) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as s:
            await s.initialize()
            note(out, "listed", (await s.list_tools()).tools)
            async with anyio.create_task_group() as tg:
                if trigger:
                    tg.start_soon(again, s, out, trigger)
                while True:
                    await changed.wait()
                    changed = anyio.Event()
                    note(out, "changed", (await s.list_tools()).tools)


anyio.run(main)
