"""Drives `clankie mcp --fleet` over stdio with the Python MCP SDK at one
protocol version, as harnesses of different eras do, and prints one JSON
object: the tools listed, a search, a call with its receipt, and the call's
content blocks.

Usage: python versions_session.py CLANKIE_BIN MODE
MODE:
  handshake   initialize (the SDK's newest handshake version, 2025-11-25)
  stamped     initialize, then every call also carries the 2026-07-28
              stamp in its `_meta` (protocol version, client info and
              capabilities), as Claude Code 2.x stamps its requests
  modern      2026-07-28: `server/discover`, then self-contained requests
              (version, client info and capabilities in each `_meta`)
Env: CLANKIE_FLEET_URL, CLANKIE_FLEET_TOKEN (passed through to the bridge)
"""
import json
import os
import sys

import anyio
from mcp import ClientSession, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge  # noqa: E402

STAMP = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1.332"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def main() -> None:
    clankie, mode = sys.argv[1], sys.argv[2]
    out = {"mode": mode}
    meta = STAMP if mode == "stamped" else None
    async with stdio_client(bridge.fleet(clankie)) as (read, write):
        async with ClientSession(read, write) as s:
            if mode == "modern":
                found = await s.discover()
                out["negotiated"] = getattr(found, "protocol_version", None) or str(
                    type(found).__name__
                )
            else:
                init = await s.initialize()
                out["negotiated"] = init.protocol_version
            tools = await s.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            r = await s.call_tool("clankie_tools", {"query": "echo"}, meta=meta)
            out["search"] = bridge.outcome(r)
            r = await s.call_tool(
                "clankie_call",
                {"name": "everything_echo", "arguments": {"message": "versions"}},
                meta=meta,
            )
            out["call"] = bridge.outcome(r)
            out["content"] = [c.model_dump(mode="json", exclude_none=True) for c in r.content]
    print(json.dumps(out))


anyio.run(main)
