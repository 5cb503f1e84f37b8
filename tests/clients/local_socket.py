"""HTTP on the gateway's local Unix socket, shared by the pane clients."""
import http.client
import socket


class UnixHTTP(http.client.HTTPConnection):
    """An HTTP/1.1 connection to a Unix socket path (kept alive)."""

    def __init__(self, path: str, timeout: float = 60):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.socket_path)
