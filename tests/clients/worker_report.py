"""A hired worker's harness: runs `clankie mcp --fleet` (no token; the pane
proves itself), reports to its lead with `message_clankie`, then repeats it under its
receipt id (a lookup), records what it saw and its environment, then stays open.

Usage: python worker_report.py CLANKIE_BIN OUT TEXT [GO_FILE]
With GO_FILE, waits for that file to exist before reporting.
"""
import os
import sys
import time

import anyio
from mcp import ClientSession, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge  # noqa: E402
from harness.seat_files import write_json  # noqa: E402


async def main() -> None:
    clankie, out, text = sys.argv[1], sys.argv[2], sys.argv[3]
    go = sys.argv[4] if len(sys.argv) > 4 else None
    seen = {
        "cwd": os.getcwd(),
        "env": {
            k: os.environ.get(k)
            for k in ("CLANKIE_WORKER_PANE", "CLANKIE_OPERATOR_TOKEN", "CLANKIE_CAPTAIN_TOKEN")
        },
    }
    while go and not os.path.exists(go):
        await anyio.sleep(0.1)
    params = bridge.fleet(clankie)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            tools = await s.list_tools()
            seen["tools"] = sorted(t.name for t in tools.tools)
            # The bridge chooses the send's receipt id; repeating it is a
            # lookup that never sends again.
            r = await s.call_tool("message_clankie", {"text": text})
            seen["first"], seen["first_error"] = r.structured_content, r.is_error
            receipt = (r.structured_content or {}).get("receiptId", "")
            r = await s.call_tool("message_clankie", {"text": text, "receiptId": receipt})
            seen["second"], seen["second_error"] = r.structured_content, r.is_error
    write_json(out, seen)


anyio.run(main)
time.sleep(600)
