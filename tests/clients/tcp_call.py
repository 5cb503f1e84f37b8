"""Speaks MCP to the gateway's local loopback TCP listener with no token,
using the Python SDK's streamable HTTP client: lists the bridge's tools and
calls mcp-server-time through `clankie_call`. A refusal before the session
starts is recorded by its HTTP status and reason. Writes what it saw to OUT.

Usage: python tcp_call.py STATE_DIR OUT
"""
import json
import os
import sys
import urllib.error
import urllib.request

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import bridge, discovery  # noqa: E402
from harness.seat_files import write_json  # noqa: E402

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "tcp-probe", "version": "0"},
    },
}


def probe(url: str) -> dict:
    """The admission answer on a fresh connection. A refusal the gateway
    marks retryable (503: the census ran out of time on a busy machine) is
    retried, as a real client would; any other answer is final."""
    for _ in range(10):
        seen = probe_once(url)
        if seen["status"] != 503:
            return seen
        import time

        time.sleep(0.5)
    return seen


def probe_once(url: str) -> dict:
    """One plain POST: the admission answer on a fresh connection."""
    req = urllib.request.Request(
        url,
        data=json.dumps(INIT).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return {"status": r.status}
    except urllib.error.HTTPError as e:
        body = json.loads(e.read() or b"{}")
        return {"status": e.code, "code": body.get("error", {}).get("code")}


async def main() -> None:
    state, out = sys.argv[1], sys.argv[2]
    url = discovery.gateway(state)["localMcp"]
    seen = {"probe": probe(url)}
    if seen["probe"]["status"] == 200:
        async with streamable_http_client(url) as (read, write, *_):
            async with ClientSession(read, write) as s:
                await s.initialize()
                tools = await s.list_tools()
                seen["tools"] = sorted(t.name for t in tools.tools)
                r = await s.call_tool(
                    "clankie_call",
                    {"name": "time_get_current_time", "arguments": {"timezone": "Etc/UTC"}},
                )
                seen["call"] = bridge.envelope(r)
    write_json(out, seen)


anyio.run(main)
