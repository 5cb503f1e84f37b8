"""What a process the model starts in a worker's pane can take: it reads
every /proc/*/environ and /proc/*/cmdline it can see, keeps whatever looks
like a Clankie secret, then tries every seat route of its pane on the
gateway's local Unix socket, bare and with each stolen string as a launch
header and as a bearer; then once more from an orphan (a grandchild whose
parent exited, so the nearest reaper adopted it: inside the worker sandbox,
the sandbox's own init). Prints one JSON line:

  {"secrets": [...], "routes": {"NAME": [{"status", "code"}...]},
   "orphan": {"NAME": [...]}, "scanned": N}

Usage: python seat_thief.py
The gateway is found through CLANKIE_GATEWAY_DISCOVERY; the pane from
TMUX_PANE.
"""
import http.client
import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import discovery  # noqa: E402
from harness.contract import seat_method, seat_path  # noqa: E402

# Every prefix the stack's secrets carry (owner, fleet, grant, launch).
SECRET = re.compile(rb"(clk[a-z]_[A-Za-z0-9_-]{16,})")


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def harvest():
    found, scanned = set(), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            scanned += 1
            found.update(m.decode() for m in SECRET.findall(raw))
    return sorted(found), scanned


def attempt(sock, method, path, body, headers):
    conn = UnixConnection(sock)
    data = None if body is None else json.dumps(body).encode()
    hdrs = dict(headers)
    if data is not None:
        hdrs["content-type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            parsed = json.loads(raw or b"{}")
        except ValueError:
            parsed = {}
        code = (parsed.get("error") or {}).get("code") if isinstance(parsed, dict) else None
        return {"status": resp.status, "code": code, "deliveries": len(parsed.get("deliveries") or []) if isinstance(parsed, dict) else 0}
    except OSError as e:
        return {"status": 0, "code": type(e).__name__}
    finally:
        conn.close()


def try_routes(secrets):
    sock = discovery.gateway()["unix"]
    pane = os.environ.get("TMUX_PANE", "")

    def route(name, query="", body=None):
        return (seat_method(name), seat_path(name, pane) + query, body)

    routes = {
        "poll": route("Mailbox", "?wait=0"),
        "claim": route("Claim", body={"deliveryIds": ["dlv_x"]}),
        "ack": route("Ack", body={"deliveryId": "dlv_x", "claimId": "clm_x"}),
        "release": route("Release", body={"deliveryId": "dlv_x", "claimId": "clm_x"}),
    }
    tries = [{}]
    for s in secrets:
        tries.append({"x-clankie-launch": s})
        tries.append({"authorization": f"Bearer {s}"})
    return {
        name: [attempt(sock, m, p, b, h) for h in tries]
        for name, (m, p, b) in routes.items()
    }


def as_orphan(fn):
    """Runs fn in a grandchild once its parent has exited and a reaper has
    adopted it; returns what fn returned."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        if os.fork() == 0:
            while os.getppid() == child:
                time.sleep(0.01)
            os.write(w, json.dumps(fn()).encode())
            os._exit(0)
        os._exit(0)
    os.close(w)
    os.waitpid(child, 0)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return json.loads(b"".join(chunks) or b"null")


def main() -> None:
    secrets, scanned = harvest()
    seen = {
        "secrets": secrets,
        "routes": try_routes(secrets),
        "orphan": as_orphan(lambda: try_routes(secrets)),
        "scanned": scanned,
    }
    print(json.dumps(seen))


main()
