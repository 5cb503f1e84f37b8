"""A seat's long poll sent after its proof went stale.

On one kept-alive connection to the gateway's local Unix socket: a first
poll (no wait) learns the catalog revision, and OUT.first is written. The
test then kills this process's parent (the pane's agent), so this process
leaves the pane's lineage, and writes OUT.go. A second poll then waits on
the revision; the test changes the catalog while it waits. Whatever that
poll answers is written to OUT: {"status", "code", "listing"}.

SIGHUP is ignored: the pane closing must not end this process first.

Usage: python stale_poll.py OUT
The gateway is found through CLANKIE_GATEWAY_DISCOVERY; the pane from
TMUX_PANE.
"""
import http.client
import json
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import discovery  # noqa: E402
from harness.contract import seat_path  # noqa: E402


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def get(conn, target):
    conn.request("GET", target)
    r = conn.getresponse()
    value = json.loads(r.read() or b"null")
    return r.status, value


def write(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.rename(path + ".tmp", path)


def main() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    out = sys.argv[1]
    conn = UnixConnection(discovery.gateway()["unix"])
    poll = seat_path("Mailbox", os.environ.get("TMUX_PANE", ""))
    status, first = get(conn, poll + "?wait=0")
    if status != 200:
        write(out, {"status": status, "code": None, "first": first})
        return
    revision = first.get("catalogRevision", "")
    write(out + ".first", {"revision": revision})
    while not os.path.exists(out + ".go"):
        time.sleep(0.02)
    status, answer = get(conn, f"{poll}?wait=25000&revision={revision}")
    code = answer.get("error", {}).get("code") if isinstance(answer, dict) else None
    listing = isinstance(answer, dict) and answer.get("listing") is not None
    write(out, {"status": status, "code": code, "listing": listing})


main()
