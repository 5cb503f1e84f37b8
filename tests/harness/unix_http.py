"""HTTP on the gateway's local Unix socket, where the kernel names the
calling process and admission proves its pane."""
import http.client
import json
import os
import socket


class UnixHTTP(http.client.HTTPConnection):
    """An HTTP/1.1 connection to a Unix socket path (kept alive)."""

    def __init__(self, path: str, timeout: float = 60):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.socket_path)


def pane_target(target: str) -> str:
    """`target` with `{pane}` replaced by this pane's id (TMUX_PANE), escaped."""
    return target.replace("{pane}", os.environ["TMUX_PANE"].replace("%", "%25"))


def request_json(
    conn: http.client.HTTPConnection, method: str, target: str, body=None, headers=None
) -> dict:
    """One request with an optional JSON body and more headers (a `Host`
    there replaces the default): {"status", "body"}, the body parsed as
    JSON (null when empty)."""
    data = json.dumps(body) if body is not None else None
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    conn.request(method, target, body=data, headers=all_headers)
    r = conn.getresponse()
    return {"status": r.status, "body": json.loads(r.read() or b"null")}
