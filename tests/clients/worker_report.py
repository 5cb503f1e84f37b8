"""A hired worker's harness: runs `clankie mcp --fleet` (no token; the pane
proves itself), reports to its lead with `message_clankie` twice under one
receipt id, records what it saw and its environment, then stays open.

Usage: python worker_report.py CLANKIE_BIN OUT TEXT [GO_FILE]
With GO_FILE, waits for that file to exist before reporting.
"""
import json
import os
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


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
    receipt = "rpt-test-" + os.environ.get("TMUX_PANE", "%0").lstrip("%")
    params = StdioServerParameters(command=clankie, args=["mcp", "--fleet"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            tools = await s.list_tools()
            seen["tools"] = sorted(t.name for t in tools.tools)
            for key in ("first", "second"):
                r = await s.call_tool("message_clankie", {"text": text, "receiptId": receipt})
                seen[key] = r.structured_content
                seen[key + "_error"] = r.is_error
    with open(out + ".tmp", "w") as f:
        json.dump(seen, f)
    os.rename(out + ".tmp", out)


anyio.run(main)
time.sleep(600)
