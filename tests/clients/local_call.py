"""Runs `clankie mcp --fleet` with no token (the local socket route), lists
its tools and calls mcp-server-time through it; writes what it saw to OUT.

Usage: python local_call.py CLANKIE_BIN OUT [AGAIN]
With AGAIN, the call is made that many times more in the same session
("again": how many of those were ok).
"""
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge  # noqa: E402
from harness.seat_files import write_json  # noqa: E402


async def main() -> None:
    clankie, out = sys.argv[1], sys.argv[2]
    again = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    env = {k: v for k, v in os.environ.items() if k != "CLANKIE_FLEET_TOKEN"}
    seen = {}
    params = StdioServerParameters(command=clankie, args=["mcp", "--fleet"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            try:
                tools = await s.list_tools()
                seen["tools"] = sorted(t.name for t in tools.tools)
            except Exception as e:  # the refusal is what some tests expect
                seen["list_error"] = str(e)
            r = await s.call_tool(
                "clankie_call",
                {"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}},
            )
            seen["call"] = bridge.envelope(r)
            seen["isError"] = r.is_error
            ok = 0
            for _ in range(again):
                r = await s.call_tool(
                    "clankie_call",
                    {"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}},
                )
                ok += bridge.envelope(r).get("outcome") == "ok"
            seen["again"] = ok
    write_json(out, seen)


anyio.run(main)
