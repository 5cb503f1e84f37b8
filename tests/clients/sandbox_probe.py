"""What a hired worker can reach, seen from inside its pane. Run as a hire's
command; writes one JSON object to OUT and stays open.

Usage: python sandbox_probe.py OUT STATE_ROOT HIDDEN_DIR CREDS_FILE SERVICE_PIDS TMUX_SOCKET BIN_DIR

- the owner credential, read directly;
- every path under the state folder;
- a connect to each internal socket, and to the local MCP socket;
- what the hidden folder (the credentials folder) holds, and what the
  credentials file reads as;
- renaming the state folder and its parent (to give a protected file a
  path no mask names);
- whether the stack's service processes are visible at all;
- a connect to the linked tmux server;
- planting a file among the stack's binaries, and in a folder of the
  stack's PATH (here the Python venv's), which services run later;
- a forked child writing on its parent's connection while naming the
  parent in SCM_CREDENTIALS (a forgery only CAP_SYS_ADMIN may make).
"""
import errno
import json
import os
import socket
import struct
import sys
import time

out, state, hidden, creds_file, pids, tmux, bin_dir = sys.argv[1:8]
seen = {}


def outcome(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    finally:
        s.close()


seen["owner_token"] = outcome(lambda: open(os.path.join(state, "owner.token")).read())
tree = []
for root, dirs, files in os.walk(state):
    for name in dirs + files:
        tree.append(os.path.relpath(os.path.join(root, name), state))
seen["state_tree"] = sorted(tree)
seen["internal"] = {
    name: outcome(lambda n=name: connect(os.path.join(state, "run", f"{n}.sock")))
    for name in ["admission", "mcp-host", "tracker", "mailbox", "auto", "gateway"]
}
seen["local_mcp"] = outcome(lambda: connect(os.path.join(state, "run", "fleet", "mcp.sock")))
seen["hidden"] = sorted(os.listdir(hidden)) if os.path.isdir(hidden) else None
try:
    seen["credentials_file"] = open(creds_file).read()
except OSError as e:
    seen["credentials_file"] = errno.errorcode.get(e.errno, "error")
seen["rename_state"] = outcome(lambda: os.rename(state, state + ".moved"))
parent = os.path.dirname(state)
seen["rename_parent"] = outcome(lambda: os.rename(parent, parent + ".moved"))
seen["services_visible"] = [p for p in pids.split(",") if p and os.path.exists(f"/proc/{p}")]
seen["tmux"] = outcome(lambda: connect(tmux))
seen["plant_binary"] = outcome(lambda: open(os.path.join(bin_dir, "clankie-planted"), "w"))
seen["plant_on_path"] = outcome(
    lambda: open(os.path.join(os.path.dirname(sys.executable), "git"), "w")
)


def forged():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(state, "run", "fleet", "mcp.sock"))
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        creds = struct.pack("iII", os.getppid(), os.getuid(), os.getgid())
        try:
            s.sendmsg([b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"],
                       [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
            os.write(w, b"ok")
        except OSError as e:
            os.write(w, errno.errorcode.get(e.errno, "error").encode())
        os._exit(0)
    os.close(w)
    answer = os.read(r, 100).decode()
    os.waitpid(child, 0)
    return answer


seen["forged_credentials"] = forged()
with open(out + ".tmp", "w") as f:
    json.dump(seen, f)
os.rename(out + ".tmp", out)
time.sleep(600)
