"""Resumes a call's event stream with Last-Event-ID, over raw streamable HTTP.

    resume_call.py MCP_URL BEARER TOOL ARGS_JSON

Opens a session, sends one `clankie_call` asking for progress, reads the
answer's stream until its first progress step with an id, and drops the
connection there. Then it asks for the rest with `GET` and `Last-Event-ID`, reads until
the call's result, and prints one JSON line:

    {"firstId": ID, "before": [KIND...], "after": [KIND...], "status": N, "result": RESULT}

where a KIND is a method (a progress step as `progress:N`) or `result`.
"""

import json
import sys

import httpx2 as httpx  # what the MCP SDK itself speaks HTTP with

ACCEPT = "application/json, text/event-stream"


def events(response):
    """Server-sent events as (id, data) pairs, as they arrive."""
    ident, data = None, []
    for line in response.iter_lines():
        if line == "":
            if data or ident:
                yield ident, "\n".join(data)
            ident, data = None, []
        elif line.startswith("id:"):
            ident = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def parse(data: str) -> dict:
    # An event with an id and no data primes the stream for resumption.
    return json.loads(data) if data else {"method": "(priming)"}


def kind(message: dict) -> str:
    if message.get("method") == "notifications/progress":
        return f"progress:{message['params']['progress']}"
    return message.get("method") or ("result" if "result" in message or "error" in message else "?")


def main() -> None:
    url, bearer, tool, args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    headers = {"Authorization": f"Bearer {bearer}", "Accept": ACCEPT}
    with httpx.Client(timeout=60) as client:
        init = client.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "resume-call", "version": "1"}}})
        init.raise_for_status()
        headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
        headers["MCP-Protocol-Version"] = "2025-06-18"
        client.post(url, headers=headers,
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "clankie_call", "arguments": {"name": tool, "arguments": args},
            "_meta": {"progressToken": "resume-1"}}}
        before, first_id = [], None
        with client.stream("POST", url, headers=headers, json=call) as r:
            for ident, data in events(r):
                message = parse(data)
                before.append(kind(message))
                # Dropped once a progress step came with an id to resume from.
                if ident and message.get("method") == "notifications/progress":
                    first_id = ident
                    break
        # The connection is gone; the rest comes on a new one.
        after, result = [], None
        resume = dict(headers, **{"Last-Event-ID": first_id or ""})
        with client.stream("GET", url, headers=resume) as r:
            status = r.status_code
            for _, data in events(r):
                message = parse(data)
                after.append(kind(message))
                if message.get("id") == 2:
                    result = message.get("result") or message.get("error")
                    break
        print(json.dumps({"firstId": first_id, "before": before, "after": after,
                          "status": status, "result": result}))


if __name__ == "__main__":
    main()
