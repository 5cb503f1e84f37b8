"""A hired seat's harness, driven through files by a test.

Runs `clankie mcp --fleet` (no token), records every channel notification
the bridge hands it (`notifications/claude/channel`) in DIR/NAME.inbox, one
JSON object per line, and executes commands the test drops in
DIR/NAME.cmd.N (JSON {"tool", "args"} for an MCP tool call, or {"http":
[METHOD, PATH, BODY]} for a request on the gateway's local Unix socket),
writing each answer to DIR/NAME.res.N. Its own seat id goes to DIR/NAME.seat.

Usage: python peer_seat.py CLANKIE_BIN DIR NAME
"""
import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from local_socket import UnixHTTP
from seatfiles import SeatFiles, write_json
from mcp.client.extension import NotificationBinding
from pydantic import BaseModel, ConfigDict


class Channel(BaseModel):
    model_config = ConfigDict(extra="allow")
    content: str
    meta: dict = {}


clankie, folder, name = sys.argv[1], sys.argv[2], sys.argv[3]


path = SeatFiles(folder, name).path
write = write_json


def do_http(method: str, target: str, body) -> dict:
    # A hire is told where the discovery file is, not where the state is.
    with open(os.environ["CLANKIE_GATEWAY_DISCOVERY"]) as f:
        sock_path = json.load(f)["unix"]
    conn = UnixHTTP(sock_path)
    pane = os.environ["TMUX_PANE"].replace("%", "%25")
    data = json.dumps(body) if body is not None else None
    conn.request(method, target.replace("{pane}", pane), body=data,
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    return {"status": r.status, "body": json.loads(r.read() or b"null")}


async def on_channel(params: Channel) -> None:
    with open(path("inbox"), "a") as f:
        f.write(json.dumps({"content": params.content, "meta": params.meta}) + "\n")


async def main() -> None:
    params = StdioServerParameters(command=clankie, args=["mcp", "--fleet"], env=dict(os.environ))
    binding = NotificationBinding(
        method="notifications/claude/channel", params_type=Channel, handler=on_channel
    )
    async with stdio_client(params) as (read, write_stream):
        async with ClientSession(read, write_stream, notification_bindings=[binding]) as s:
            await s.initialize()
            # Wait until this seat is known (its bridge has polled once).
            while True:
                r = await s.call_tool("list_fleet_seats", {})
                me = (r.structured_content or {}).get("self") or {}
                if not r.is_error and me.get("reachable"):
                    write(path("seat"), me)
                    break
                # Not a seat (yet): what it was told, for tests that expect a refusal.
                write(path("last"), {"isError": bool(r.is_error), "result": r.structured_content})
                await anyio.sleep(0.2)
            n = 0
            while True:
                cmd = path(f"cmd.{n}")
                if not os.path.exists(cmd):
                    await anyio.sleep(0.05)
                    continue
                with open(cmd) as f:
                    c = json.load(f)
                if c.get("list"):
                    tools = await s.list_tools()
                    out = {"tools": sorted(t.name for t in tools.tools)}
                elif "http" in c:
                    method, target, body = c["http"]
                    out = await anyio.to_thread.run_sync(do_http, method, target, body)
                else:
                    r = await s.call_tool(c["tool"], c.get("args", {}))
                    out = {"isError": bool(r.is_error), "result": r.structured_content}
                write(path(f"res.{n}"), out)
                n += 1


anyio.run(main)
