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
from mcp import ClientSession, StdioServerParameters, stdio_client
from seatfiles import SeatFiles, write_json

clankie, folder, name = sys.argv[1], sys.argv[2], sys.argv[3]


path = SeatFiles(folder, name).path
write = write_json


async def one(s: ClientSession, c: dict) -> dict:
    args = {"name": c["call"], "arguments": c.get("args", {})}
    if c.get("background"):
        args["background"] = True
    t0 = time.monotonic()
    r = await s.call_tool("clankie_call", args)
    ms = (time.monotonic() - t0) * 1000
    return {"isError": bool(r.is_error), "result": r.structured_content, "ms": ms}


async def main() -> None:
    params = StdioServerParameters(command=clankie, args=["mcp", "--fleet"], env=dict(os.environ))
    async with stdio_client(params) as (read, write_stream):
        async with ClientSession(read, write_stream) as s:
            await s.initialize()
            while True:
                r = await s.call_tool("clankie_tools", {"query": "linear issue"})
                if not r.is_error:
                    write(path("ready"), r.structured_content)
                    break
                await anyio.sleep(0.2)
            n = 0
            while True:
                cmd = path(f"cmd.{n}")
                if not os.path.exists(cmd):
                    await anyio.sleep(0.02)
                    continue
                with open(cmd) as f:
                    c = json.load(f)
                if c.get("mark"):
                    write(path(f"started.{n}"), {"at": time.time()})
                if "tools" in c:
                    r = await s.call_tool("clankie_tools", c["tools"])
                    out = {"isError": bool(r.is_error), "result": r.structured_content}
                elif "batch" in c:
                    results = [None] * len(c["batch"])

                    async def run(i: int, call: dict) -> None:
                        results[i] = await one(s, call)

                    async with anyio.create_task_group() as tg:
                        for i, call in enumerate(c["batch"]):
                            tg.start_soon(run, i, call)
                    out = results
                else:
                    out = await one(s, c)
                write(path(f"res.{n}"), out)
                n += 1


anyio.run(main)
