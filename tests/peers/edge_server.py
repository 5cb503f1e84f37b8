"""An upstream MCP server of our own for the edge cases real servers lack.

Tools:
  slow(seconds, tag)  appends `tag` to $EDGE_LOG when it starts, sleeps, answers
  fail(message)       answers with isError: true
  add_tool(name)      registers a tool and sends notifications/tools/list_changed
  hang(tag)           appends `tag` to $EDGE_LOG, then never answers
  stepped(steps, seconds, tag)  appends `tag:N` at each step; a cancel stops it
  traced(tag)         appends the traceparent it got in `_meta` and as a header

$EDGE_EXIT_AFTER_MS: the server exits that long after it starts (an upstream
that keeps crashing).

stdio:  python edge_server.py
HTTP:   python edge_server.py http PORT   (serves http://127.0.0.1:PORT/mcp)
"""
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("clankie-edge")


def _log(tag: str) -> None:
    path = os.environ.get("EDGE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(tag + "\n")
            f.flush()
            os.fsync(f.fileno())


@server.tool()
async def slow(seconds: float, tag: str) -> str:
    """Record `tag`, sleep for `seconds`, then answer."""
    _log(tag)
    await anyio.sleep(seconds)
    return f"slept {seconds} for {tag}"


@server.tool()
async def stepped(steps: int, seconds: float, tag: str) -> str:
    """Record `tag:N` at each of `steps` steps, `seconds` apart: a call
    cancelled on the way stops recording."""
    for n in range(1, steps + 1):
        _log(f"{tag}:{n}")
        await anyio.sleep(seconds)
    return f"{steps} steps for {tag}"


@server.tool()
def fail(message: str) -> str:
    """Always fails: the result carries isError: true."""
    raise ToolError(message)


@server.tool()
async def hang(tag: str) -> str:
    """Record `tag`, then never answer."""
    _log(tag)
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called `name` and announce that the tool list changed."""

    def dynamic() -> str:
        return f"I am {name}"

    server.add_tool(dynamic, name=name, description=f"added at run time: {name}")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
async def traced(tag: str, ctx: Context) -> str:
    """Appends `tag meta=TRACEPARENT header=TRACEPARENT` to $EDGE_LOG: the
    trace context the call arrived with, in `_meta` and (over HTTP) as a
    header; "-" where there was none."""
    meta = ctx.request_context.meta or {}
    headers = ctx.headers or {}
    in_meta = meta.get("traceparent") or "-"
    in_header = headers.get("traceparent") or "-"
    _log(f"{tag} meta={in_meta} header={in_header}")
    return in_meta


def _exit_later() -> None:
    ms = os.environ.get("EDGE_EXIT_AFTER_MS")
    if ms:
        import threading

        threading.Timer(int(ms) / 1000, lambda: os._exit(1)).start()


if __name__ == "__main__":
    _exit_later()
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
