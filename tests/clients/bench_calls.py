"""Times `clankie_call` through `clankie mcp --fleet` from the Python MCP
SDK, as a harness in a pane would (the local route: the kernel proves the
pane). Writes the per-call durations in microseconds to OUT as JSON.

Usage: python bench_calls.py CLANKIE_BIN N OUT
"""
import json
import os
import sys
import time

import anyio
from mcp import ClientSession, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge  # noqa: E402


async def main() -> None:
    clankie, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    env_params = bridge.fleet(clankie)
    # The seat's deliveries are not this harness's to take.
    env_params.env["CLANKIE_FLEET_NO_CHANNEL"] = "true"
    async with stdio_client(env_params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            while "clankie_call" not in [t.name for t in (await s.list_tools()).tools]:
                await anyio.sleep(0.2)
            durations = []
            for i in range(n + 1):
                t0 = time.perf_counter()
                r = await s.call_tool(
                    "clankie_call",
                    {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}},
                )
                took = (time.perf_counter() - t0) * 1e6
                if r.is_error:
                    raise SystemExit(f"call {i} failed: {r}")
                if i:  # the first call warms the connection
                    durations.append(took)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(durations, f)
    os.replace(tmp, out)


anyio.run(main)
