"""One GET of this pane's seat mailbox on the gateway's local Unix socket,
as any process in the pane could try it; prints {"status", "code",
"launchTokenInEnv"} as one JSON line.

Usage: python seat_poll.py [--token TOKEN]
The gateway is found through CLANKIE_GATEWAY_DISCOVERY; the pane from
TMUX_PANE.
"""
import http.client
import json
import os
import socket
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import discovery  # noqa: E402


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def main() -> None:
    headers = {}
    if "--token" in sys.argv:
        headers["x-clankie-launch"] = sys.argv[sys.argv.index("--token") + 1]
    pane = urllib.parse.quote(os.environ.get("TMUX_PANE", ""), safe="")
    conn = UnixConnection(discovery.gateway()["unix"])
    conn.request("GET", f"/v1/fleet/seats/{pane}/mailbox?wait=0", headers=headers)
    resp = conn.getresponse()
    body = json.loads(resp.read() or b"{}")
    print(json.dumps({
        "status": resp.status,
        "code": (body.get("error") or {}).get("code"),
        "launchTokenInEnv": "CLANKIE_LAUNCH_TOKEN" in os.environ,
    }))


main()
