"""Opens one connection to the gateway's local loopback TCP listener, writes
`CLIENT_PORT SERVER_PORT` to OUT and holds the connection open.

Usage: python hold_tcp.py STATE_DIR OUT
"""
import json
import os
import socket
import sys
import time

state, out = sys.argv[1], sys.argv[2]
with open(os.path.join(state, "run", "fleet", "gateway.json")) as f:
    host, port = json.load(f)["localMcp"].split("//")[1].split("/")[0].rsplit(":", 1)
s = socket.create_connection((host, int(port)))
with open(out + ".tmp", "w") as f:
    f.write(f"{s.getsockname()[1]} {port}")
os.rename(out + ".tmp", out)
time.sleep(900)
