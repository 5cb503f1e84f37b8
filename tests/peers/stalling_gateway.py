"""A gateway that accepts and never answers a tool listing: the stalled
HTTP request a bridge's initial discovery must abandon and retry.

It speaks just enough streamable HTTP on a Unix socket for a client to
initialize (a JSON answer with a session id, 202 for notifications, 405 for
the optional GET stream); every `tools/list` is held open forever, and its
arrival is appended to LOG as a `list` line. Every other request appends
`METHOD PATH` and is answered 404 (a seat route, say).

With STALL_LISTS=0 a listing is answered at once with no tools instead.

usage: python stalling_gateway.py SOCKET LOG
"""
import json
import os
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

SOCKET, LOG = sys.argv[1], sys.argv[2]
FOREVER = threading.Event()
STALL = os.environ.get("STALL_LISTS", "1") != "0"


def note(line: str) -> None:
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(line + "\n")


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

    def is_mcp(self) -> bool:
        # A client on a Unix socket may send the absolute URI.
        return urlsplit(self.path).path.startswith("/mcp")

    def do_GET(self) -> None:
        if self.is_mcp():
            self.reply(405)
        else:
            note(f"GET {self.path}")
            self.reply(404, {"error": {"code": "not_found"}})

    def do_DELETE(self) -> None:
        self.reply(200)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not self.is_mcp():
            self.rfile.read(length)
            note(f"POST {self.path}")
            self.reply(404, {"error": {"code": "not_found"}})
            return
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
            note("list")
            if STALL:
                FOREVER.wait()
            self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": []}})
        else:
            self.reply(200, {"jsonrpc": "2.0", "id": msg["id"], "result": {}})


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


if os.path.exists(SOCKET):
    os.unlink(SOCKET)
Server(SOCKET, Handler).serve_forever()
