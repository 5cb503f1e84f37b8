"""A scripted OpenAI-compatible model for driving real Pi turns offline.

Usage: python model_server.py PORT_FILE [LOG_FILE]

Listens on 127.0.0.1 (a free port, written to PORT_FILE once it listens)
and answers `POST /v1/chat/completions` with server-sent events, as a
streaming provider does. What it says is scripted by the conversation:

- The newest user message holds the script, one step per line:
    CALL <tool> <json arguments>    one tool call
    SAY <text>                      the final answer (default: "done")
    HANG                            never answer (a provider that is down)
  Lines that are none of these are ignored.
- Each tool result since that user message moves the script one CALL on;
  when the CALLs are used up, the model says the SAY text and stops.
- In arguments and text, `{{last}}` is the newest tool result's text
  (JSON-escaped inside arguments), so a step can pass on what a tool said.

Every request is appended to LOG_FILE as one JSON line: the tools the
client offered (name and parameters) and the messages' roles, so a test
can check what the model was shown.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG_LOCK = threading.Lock()


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def plan(messages):
    """What to do next: ("call", name, args) | ("say", text) | ("hang",)."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    script = text_of(messages[last_user].get("content")) if last_user >= 0 else ""
    after = messages[last_user + 1 :]
    results = [m for m in after if m.get("role") == "tool"]
    last = text_of(results[-1].get("content")) if results else ""
    calls, say = [], "done"
    for line in script.splitlines():
        line = line.strip()
        if line == "HANG":
            return ("hang",)
        if line.startswith("CALL "):
            rest = line[5:].strip()
            name, _, args = rest.partition(" ")
            calls.append((name, args.strip() or "{}"))
        elif line.startswith("SAY "):
            say = line[4:]
    escaped = json.dumps(last)[1:-1]
    if len(results) < len(calls):
        name, args = calls[len(results)]
        return ("call", name, args.replace("{{last}}", escaped))
    return ("say", say.replace("{{last}}", last))


def chunk(model: str, delta: dict, finish=None) -> bytes:
    body = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.send_error(400, "not JSON")
            return
        messages = req.get("messages") or []
        if LOG:
            entry = {
                "tools": [
                    {"name": t.get("function", {}).get("name"),
                     "parameters": t.get("function", {}).get("parameters")}
                    for t in req.get("tools") or []
                ],
                "roles": [m.get("role") for m in messages],
                "last": text_of(messages[-1].get("content")) if messages else "",
            }
            with LOG_LOCK, open(LOG, "a") as f:
                f.write(json.dumps(entry) + "\n")
        step = plan(messages)
        if step[0] == "hang":
            time.sleep(3600)
            return
        model = req.get("model", "scripted")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        out = [chunk(model, {"role": "assistant", "content": ""})]
        if step[0] == "call":
            _, name, args = step
            call = {"index": 0, "id": f"call_{len(messages)}", "type": "function",
                    "function": {"name": name, "arguments": args}}
            out.append(chunk(model, {"tool_calls": [call]}))
            out.append(chunk(model, {}, "tool_calls"))
        else:
            out.append(chunk(model, {"content": step[1]}))
            out.append(chunk(model, {}, "stop"))
        out.append(b"data: [DONE]\n\n")
        for piece in out:
            self.wfile.write(piece)
            self.wfile.flush()
        self.close_connection = True


LOG = sys.argv[2] if len(sys.argv) > 2 else None

if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()
