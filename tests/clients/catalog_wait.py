"""Waits on a seat's tool-catalog long poll over the gateway's local socket.

Usage: python catalog_wait.py STATE_DIR GO_FILE OUT PANE
Waits for GO_FILE, reads the current revision (wait=0), writes it to
OUT.first, then long-polls with that revision (wait=25000) and writes the
answer to OUT.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import discovery  # noqa: E402
from harness.seat_files import write_json as write  # noqa: E402
from harness.unix_http import UnixHTTP  # noqa: E402
from harness.contract import seat_path  # noqa: E402

state, go, out, pane = sys.argv[1:5]


while not os.path.exists(go):
    time.sleep(0.05)
conn = UnixHTTP(discovery.gateway(state)["unix"])
base = seat_path("ToolCatalog", pane)
conn.request("GET", base + "?wait=0")
r = conn.getresponse()
first = json.loads(r.read())
write(out + ".first", {"status": r.status, "body": first})
conn.request("GET", base + f"?wait=25000&revision={first.get('catalogRevision', '')}")
r = conn.getresponse()
write(out, {"status": r.status, "body": json.loads(r.read()), "at": time.time()})
