"""Drives `clankie mcp --fleet` with the Python MCP SDK over stdio and
reports what it heard while calls ran: progress steps under its own token,
and log lines at the level it set.

Usage: python hear_session.py CLANKIE_BIN LEVEL
Env:   CLANKIE_FLEET_URL, CLANKIE_FLEET_TOKEN (passed through to the bridge)

Prints one JSON object:
  {"progress": [[progress, total], ...], "call": envelope,
   "toggle": envelope, "lines": [level, ...] heard after turning the
   upstream's logging on}
"""
import json
import os
import sys

import anyio
from mcp import ClientSession, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge  # noqa: E402

# How long to wait for the upstream's simulated log lines (one every 5 s,
# at a random level).
LINES_WINDOW = 90


async def main() -> None:
    clankie, level = sys.argv[1], sys.argv[2]
    lines: list[str] = []
    heard = anyio.Event()

    async def on_line(params) -> None:
        lines.append(params.level)
        heard.set()

    steps: list[list[float]] = []

    async def on_progress(progress: float, total, message) -> None:
        steps.append([progress, total])

    out: dict = {}
    async with stdio_client(bridge.fleet(clankie)) as (read, write):
        async with ClientSession(read, write, logging_callback=on_line) as s:
            await s.initialize()
            r = await s.call_tool(
                "clankie_call",
                {
                    "name": "everything_trigger-long-running-operation",
                    "arguments": {"duration": 2, "steps": 4},
                },
                progress_callback=on_progress,
            )
            out["call"] = bridge.envelope(r)
            out["progress"] = steps
            await s.set_logging_level(level)
            r = await s.call_tool(
                "clankie_call",
                {"name": "everything_toggle-simulated-logging", "arguments": {}},
            )
            out["toggle"] = bridge.envelope(r)
            with anyio.move_on_after(LINES_WINDOW):
                await heard.wait()
            out["lines"] = list(lines)
            # Quiet again, so the account stops sending.
            await s.call_tool(
                "clankie_call",
                {"name": "everything_toggle-simulated-logging", "arguments": {}},
            )
    print(json.dumps(out))


anyio.run(main)
