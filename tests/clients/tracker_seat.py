"""A hired seat's harness for tracker tests, driven through files.

Runs `clankie mcp --fleet` (no token) and waits until the bridge answers
`clankie_tools`, writing that first answer to DIR/NAME.ready. Then executes
the commands the test drops in DIR/NAME.cmd.N and writes each answer to
DIR/NAME.res.N:

- {"tools": {...}}: a `clankie_tools` call with those arguments.
- {"call": NAME, "args": {...}, "background": bool}: one `clankie_call`.
- {"batch": [{"call", "args", "background"}, ...]}: the calls at once,
  concurrently on the one session; the answer is the list of results in
  order. Each result is {"isError", "result", "ms"}.
- {"mark": true, ...}: as the above, but DIR/NAME.started.N is written just
  before the calls go out.

Usage: python tracker_seat.py CLANKIE_BIN DIR NAME
"""
import json
import os
import sys
import time

import anyio
from mcp import ClientSession, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge  # noqa: E402
from harness.seat_files import SeatFiles  # noqa: E402

clankie, folder, name = sys.argv[1], sys.argv[2], sys.argv[3]


files = SeatFiles(folder, name)


async def one(s: ClientSession, c: dict) -> dict:
    args = {"name": c["call"], "arguments": c.get("args", {})}
    if c.get("background"):
        args["background"] = True
    t0 = time.monotonic()
    r = await s.call_tool("clankie_call", args)
    ms = (time.monotonic() - t0) * 1000
    return {**bridge.outcome(r), "ms": ms}


async def main() -> None:
    params = bridge.fleet(clankie)
    async with stdio_client(params) as (read, write_stream):
        async with ClientSession(read, write_stream) as s:
            await s.initialize()
            while True:
                r = await s.call_tool("clankie_tools", {"query": "linear issue"})
                if not r.is_error:
                    files.write("ready", r.structured_content)
                    break
                await anyio.sleep(0.2)
            async def answer(n: int, c: dict):
                if c.get("mark"):
                    files.write(f"started.{n}", {"at": time.time()})
                if "tools" in c:
                    return bridge.outcome(await s.call_tool("clankie_tools", c["tools"]))
                if "batch" in c:
                    results = [None] * len(c["batch"])

                    async def run(i: int, call: dict) -> None:
                        results[i] = await one(s, call)

                    async with anyio.create_task_group() as tg:
                        for i, call in enumerate(c["batch"]):
                            tg.start_soon(run, i, call)
                    return results
                return await one(s, c)

            await files.serve(answer, poll=0.02)

anyio.run(main)
