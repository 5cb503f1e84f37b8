"""Drives `clankie mcp --grant FILE` with the Python MCP SDK over stdio, as
a worker's harness would, running a plan of steps and printing one JSON
list with each step's answer.

Usage: python grant_session.py CLANKIE_BIN GRANT_FILE PLAN_JSON

Steps:
  {"list": true}                          -> {"tools": [{name, inputSchema}]}
  {"call": NAME, "args": {...}, "receipt": ID?, "progress": BOOL?}
                                          -> {"isError", "content", "structured", "meta",
                                              "progress": [[p, total], ...] when asked}
                                             or {"error": TEXT} when the request failed
  {"level": LEVEL}                        -> sets the session's logging level
  {"lines": true}                         -> {"lines": [level, ...]} heard so far
  {"sleep": SECONDS}                      -> idles
  {"mark": PATH}                          -> writes PATH (the test waits for it)
  {"wait": PATH}                          -> waits until PATH exists
"""
import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.bridge import META  # noqa: E402


LINES: list[str] = []


async def on_line(params) -> None:
    LINES.append(params.level)


async def step(s: ClientSession, st: dict):
    if st.get("list"):
        tools = await s.list_tools()
        return {"tools": [{"name": t.name, "inputSchema": t.input_schema} for t in tools.tools]}
    if "call" in st:
        meta = {META["receiptId"]: st["receipt"]} if st.get("receipt") else None
        steps: list[list] = []

        async def on_progress(progress, total, message) -> None:
            steps.append([progress, total])

        callback = on_progress if st.get("progress") else None
        try:
            r = await s.call_tool(
                st["call"], st.get("args", {}), meta=meta, progress_callback=callback
            )
        except Exception as e:  # the request itself failed: what a harness sees
            return {"error": str(e)}
        answer = {
            "isError": bool(r.is_error),
            "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in r.content],
            "structured": r.structured_content,
            "meta": r.meta,
        }
        if callback:
            answer["progress"] = steps
        return answer
    if "level" in st:
        await s.set_logging_level(st["level"])
        return {"level": st["level"]}
    if st.get("lines"):
        return {"lines": list(LINES)}
    if "sleep" in st:
        await anyio.sleep(st["sleep"])
        return {"slept": st["sleep"]}
    if "mark" in st:
        with open(st["mark"], "w") as f:
            f.write("1")
        return {"marked": True}
    if "wait" in st:
        while not os.path.exists(st["wait"]):
            await anyio.sleep(0.05)
        return {"waited": True}
    return {"unknown": st}


async def main() -> None:
    clankie, grant, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    params = StdioServerParameters(
        command=clankie, args=["mcp", "--grant", grant], env=dict(os.environ)
    )
    out = []
    try:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, logging_callback=on_line) as s:
                init = await s.initialize()
                out.append({"server": init.server_info.name})
                for st in plan:
                    out.append(await step(s, st))
    except Exception as e:  # the bridge refused to start or ended early
        out.append({"fatal": str(e)})
    print(json.dumps(out))


anyio.run(main)
