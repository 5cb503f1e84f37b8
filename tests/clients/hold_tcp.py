"""Opens one connection to the gateway's local loopback TCP listener, writes
`CLIENT_PORT SERVER_PORT` to OUT and holds the connection open.

Usage: python hold_tcp.py STATE_DIR OUT
"""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import discovery  # noqa: E402
from harness.seat_files import write_json  # noqa: E402

state, out = sys.argv[1], sys.argv[2]
host, port = discovery.local_tcp(discovery.gateway(state))
s = socket.create_connection((host, port))
with open(out + ".tmp", "w") as f:
    f.write(f"{s.getsockname()[1]} {port}")
os.rename(out + ".tmp", out)
time.sleep(900)
