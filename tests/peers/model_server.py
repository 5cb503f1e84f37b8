"""A scripted model for driving real harness turns offline: Pi, Claude Code
and Codex.

Usage: python model_server.py PORT_FILE [LOG_FILE]

Listens on 127.0.0.1 (a free port, written to PORT_FILE once it listens)
and answers, with server-sent events as a streaming provider does:
    POST /v1/chat/completions   OpenAI chat completions (Pi)
    POST /v1/messages           Anthropic Messages (Claude Code)
    POST /v1/responses          OpenAI Responses (Codex)
Each request is read into one conversation shape (user, assistant and
tool messages; see `apis.py`), so one script drives every harness alike.
What it says is scripted by the conversation.

The script is the newest user message that holds one, one step per line
(or per ` ;; `, for a script that must fit on one line):
    CALL <tool> <json arguments>    one tool call
    SAY <text>                      the final answer (default: "done")
    HANG                            never answer (a provider that is down)
    ON <text>                       starts a section that runs when a later
                                    user message contains <text>
Lines before the first ON run when the script message itself is the
newest user message. Each tool result since the newest user message moves
its section one CALL on; when the CALLs are used up, the model says the
section's SAY text. A user message no section answers gets "done".

A CALL names a tool the client offered, or one whose offered name ends in
`__<tool>` (Claude Code's `mcp__SERVER__TOOL`), or a function inside an
offered namespace (Codex's `mcp__SERVER`).

In arguments and text:
    {{last}}        the newest tool result's text since that user message
    {{re:R}}        the first match of regex R in the newest user message
                    (its first group, when R has one)
    {{lastre:R}}    the same, in the newest tool result anywhere that has one
Inside arguments, substituted text is JSON-escaped.

Every request is appended to LOG_FILE as one JSON line: when it came
(`at`, seconds since the epoch), the API, the tools the client offered
(name, parameters, namespace), the messages' roles and the newest
message's text, so a test can check what the model was shown.
"""
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import apis

LOG_LOCK = threading.Lock()


text_of = apis.text_of


STEP = re.compile(r"^(CALL|SAY|ON|HANG)\b ?(.*)$")
TEMPLATE = re.compile(r"\{\{(last|re:(.*?)|lastre:(.*?))\}\}(?!\})")


def script_lines(text: str):
    """A script's steps: one per line, or separated by ` ;; ` where the
    script had to fit one line (a harness's first prompt on its command
    line, where a newline is refused)."""
    return [part for line in text.splitlines() for part in line.split(" ;; ")]


def sections(script: str):
    """[(trigger or None, [(tool, args)], say)] in order."""
    out = [[None, [], "done"]]
    for line in script_lines(script):
        m = STEP.match(line.strip())
        if not m:
            continue
        kind, rest = m.group(1), m.group(2).strip()
        if kind == "ON":
            out.append([rest, [], "done"])
        elif kind == "CALL":
            name, _, args = rest.partition(" ")
            out[-1][1].append((name, args.strip() or "{}"))
        elif kind == "SAY":
            out[-1][2] = rest
        elif kind == "HANG":
            out[-1][1].append(("HANG", ""))
    return out


def found(pattern: str, text: str) -> str:
    try:
        m = re.search(pattern, text)
    except re.error:
        return ""
    if not m:
        return ""
    return m.group(1) if m.groups() else m.group(0)


def plan(messages):
    """What to do next: ("call", name, args) | ("say", text) | ("hang",)."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return ("say", "done")
    newest = users[-1]
    scripted = [i for i in users if any(STEP.match(l.strip()) for l in script_lines(text_of(messages[i].get("content"))))]
    if not scripted:
        return ("say", "done")
    script = scripted[-1]
    now = text_of(messages[newest].get("content"))
    parts = sections(text_of(messages[script].get("content")))
    if newest == script:
        section = parts[0]
    else:
        section = next((p for p in parts[1:] if p[0] and p[0] in now), None)
        if section is None:
            return ("say", "done")
    results = [m for m in messages[newest + 1 :] if m.get("role") == "tool"]
    every = [text_of(m.get("content")) for m in messages if m.get("role") == "tool"]
    last = text_of(results[-1].get("content")) if results else ""

    def fill(text: str, escape: bool) -> str:
        def one(m):
            if m.group(1) == "last":
                v = last
            elif m.group(2) is not None:
                v = found(m.group(2), now)
            else:
                v = next((found(m.group(3), t) for t in reversed(every) if found(m.group(3), t)), "")
            return json.dumps(v)[1:-1] if escape else v
        return TEMPLATE.sub(one, text)

    calls = section[1]
    if len(results) < len(calls):
        name, args = calls[len(results)]
        if name == "HANG":
            return ("hang",)
        return ("call", name, fill(args, True))
    return ("say", fill(section[2], False))


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

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        path = self.path.split("?")[0]
        api = apis.for_path(path)
        length = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.send_error(400, "not JSON")
            return
        if api is None:
            self.send_error(404, "no such API")
            return
        messages = api.messages(req)
        tools = api.tools(req)
        if LOG:
            entry = {
                "at": time.time(),
                "api": api.name,
                "tools": tools,
                "roles": [m.get("role") for m in messages],
                "last": text_of(messages[-1].get("content")) if messages else "",
            }
            with LOG_LOCK, open(LOG, "a") as f:
                f.write(json.dumps(entry) + "\n")
        step = plan(messages)
        if step[0] == "call" and not tools:
            # A side request that offers no tools (Codex titling its
            # thread, say) is not the script's turn.
            step = ("say", "done")
        if step[0] == "hang":
            time.sleep(3600)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        if step[0] == "call":
            out = api.call(req, apis.resolve(step[1], tools), step[2], len(messages))
        else:
            out = api.say(req, step[1])
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
