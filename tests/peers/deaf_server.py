"""A stdio MCP server that does not implement cancellation, as many do not:
it reads `notifications/cancelled` and ignores it, so a call it has started
is answered when its work is done.

Tool:
  late(seconds, tag)  appends `tag` to $EDGE_LOG, sleeps, appends
                      `tag:done` and answers "done TAG"

Plain JSON-RPC over stdin/stdout, one message a line; requests are served
concurrently so a cancel can arrive while a call sleeps.
"""
import json
import os
import sys
import threading
import time

_out = threading.Lock()


def _send(message: dict) -> None:
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def _log(tag: str) -> None:
    path = os.environ.get("EDGE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(tag + "\n")
            f.flush()
            os.fsync(f.fileno())


TOOL = {
    "name": "late",
    "description": "Record tag, sleep, record tag:done, answer.",
    "inputSchema": {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "tag": {"type": "string"}},
        "required": ["seconds", "tag"],
    },
}


def _call(rid, args: dict) -> None:
    tag = str(args.get("tag", ""))
    _log(tag)
    time.sleep(float(args.get("seconds", 0)))
    _log(f"{tag}:done")
    _send({"jsonrpc": "2.0", "id": rid,
           "result": {"content": [{"type": "text", "text": f"done {tag}"}], "isError": False}})


def main() -> None:
    for line in sys.stdin:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        method, rid = m.get("method"), m.get("id")
        if rid is None:
            continue  # notifications, cancellation among them: not heard
        if method == "initialize":
            version = m.get("params", {}).get("protocolVersion", "2025-06-18")
            _send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "clankie-deaf", "version": "1.0.0"}}})
        elif method == "tools/list":
            _send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL]}})
        elif method == "tools/call":
            args = m.get("params", {}).get("arguments") or {}
            threading.Thread(target=_call, args=(rid, args), daemon=True).start()
        elif method == "ping":
            _send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            _send({"jsonrpc": "2.0", "id": rid,
                   "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
