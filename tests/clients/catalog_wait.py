"""Waits on a seat's tool-catalog long poll over the gateway's local socket.

Usage: python catalog_wait.py STATE_DIR GO_FILE OUT PANE
Waits for GO_FILE, reads the current revision (wait=0), writes it to
OUT.first, then long-polls with that revision (wait=25000) and writes the
answer to OUT.
"""
import http.client
import json
import os
import socket
import sys
import time

state, go, out, pane = sys.argv[1:5]


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.path_ = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path_)


def write(path, value):
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.rename(path + ".tmp", path)


while not os.path.exists(go):
    time.sleep(0.05)
with open(os.path.join(state, "run", "fleet", "gateway.json")) as f:
    conn = UnixHTTP(json.load(f)["unix"])
base = f"/v1/fleet/seats/{pane}/tool-catalog"
conn.request("GET", base + "?wait=0")
r = conn.getresponse()
first = json.loads(r.read())
write(out + ".first", {"status": r.status, "body": first})
conn.request("GET", base + f"?wait=25000&revision={first.get('catalogRevision', '')}")
r = conn.getresponse()
write(out, {"status": r.status, "body": json.loads(r.read()), "at": time.time()})
