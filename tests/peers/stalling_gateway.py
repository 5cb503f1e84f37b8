"""A gateway that accepts and never answers a tool listing: the stalled
HTTP request a bridge's initial discovery must abandon and retry.

It speaks just enough streamable HTTP on a Unix socket for a client to
initialize (a JSON answer with a session id, 202 for notifications, 405 for
the optional GET stream); every `tools/list` is held open forever, and its
arrival is appended to LOG, one line per attempt.

usage: python stalling_gateway.py SOCKET LOG
"""
import json
import os
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler

SOCKET, LOG = sys.argv[1], sys.argv[2]
FOREVER = threading.Event()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def address_string(self) -> str:  # a Unix socket has no peer address
        return "unix"

    def log_message(self, *args) -> None:
        pass

    def reply(self, status: int, body=None, headers=None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.reply(405)

    def do_DELETE(self) -> None:
        self.reply(200)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        msg = json.loads(self.rfile.read(length) or b"{}")
        method = msg.get("method")
        if "id" not in msg:
            self.reply(202)
        elif method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "stalling-gateway", "version": "1"},
            }
            self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result},
                       {"Mcp-Session-Id": "stalled"})
        elif method == "tools/list":
            with open(LOG, "a", encoding="utf-8") as f:
                f.write("list\n")
            FOREVER.wait()
        else:
            self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "result": {}})


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


if os.path.exists(SOCKET):
    os.unlink(SOCKET)
Server(SOCKET, Handler).serve_forever()
