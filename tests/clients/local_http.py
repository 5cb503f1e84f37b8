"""Plain HTTP on the gateway's local Unix socket from inside a pane, where
the kernel names this process and admission proves its pane.

Usage:
  python local_http.py hold OUT
      One connection: GET the pane's tool-catalog (a proof), write
      OUT.first, wait for OUT.go, GET again on the same connection (a
      recheck) and write OUT.
  python local_http.py each OUT
      One connection: GET the pane's tool-catalog at once (a proof) and
      write OUT.0; then each time OUT.goN appears (N = 1, 2, ...), GET
      again on the same connection and write OUT.N.
  python local_http.py send SEAT OUT
      One connection: GET the fleet's seats (a seat proof), write
      OUT.first, wait for OUT.go, then on the same connection POST a peer
      message to SEAT (written to OUT.sent), and again (OUT).
  python local_http.py time ROUNDS OUT [tcp]
      ROUNDS times each: a new connection and GET /healthz (no proof), a new
      connection and GET tool-catalog (a full proof), the same request
      again on a proven connection (a recheck), and GET /healthz on it (no
      recheck); milliseconds to OUT.
  python local_http.py loaded ROUNDS OUT [tcp]
      ROUNDS full proofs back to back, each timed; a refusal is recorded
      with its code instead of ending the run (for a machine under load).
  python local_http.py proofs ROUNDS OUT [tcp]
      ROUNDS full proofs back to back (a new connection each); writes OUT
      when done.

With `tcp`, connections go to the local loopback TCP listener instead.

The gateway is found through CLANKIE_GATEWAY_DISCOVERY, else
CLANKIE_STATE/run/fleet/gateway.json; the pane from TMUX_PANE.
"""
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import discovery  # noqa: E402
from harness.seat_files import write_json as write  # noqa: E402
from harness.unix_http import UnixHTTP  # noqa: E402
from harness.contract import seat_path  # noqa: E402


def get(conn, target):
    conn.request("GET", target)
    r = conn.getresponse()
    body = r.read()
    try:
        value = json.loads(body or b"null")
    except ValueError:
        value = None
    code = (value or {}).get("error", {}).get("code") if isinstance(value, dict) else None
    return {"status": r.status, "code": code}


found = discovery.gateway()
sock = found["unix"]
tcp = sys.argv[-1] == "tcp"
tcp_host, tcp_port = discovery.local_tcp(found)


def connection():
    if tcp:
        return http.client.HTTPConnection(tcp_host, tcp_port, timeout=60)
    return UnixHTTP(sock)


catalog = seat_path("ToolCatalog", os.environ.get("TMUX_PANE", "")) + "?wait=0"

if sys.argv[1] == "hold":
    out = sys.argv[2]
    conn = connection()
    write(out + ".first", get(conn, catalog))
    while not os.path.exists(out + ".go"):
        time.sleep(0.05)
    write(out, get(conn, catalog))
elif sys.argv[1] == "each":
    out = sys.argv[2]
    conn = connection()
    write(out + ".0", get(conn, catalog))
    n = 1
    while True:
        while not os.path.exists(f"{out}.go{n}"):
            time.sleep(0.02)
        write(f"{out}.{n}", get(conn, catalog))
        n += 1
elif sys.argv[1] == "send":
    to, out = sys.argv[2], sys.argv[3]
    pane = os.environ.get("TMUX_PANE", "")
    conn = connection()
    write(out + ".first", get(conn, seat_path("Peers", pane)))
    while not os.path.exists(out + ".go"):
        time.sleep(0.05)
    for n, where in enumerate([out + ".sent", out]):
        body = json.dumps({"seat": to, "text": f"from beyond {n}", "receiptId": f"gone-{n}"})
        conn.request(
            "POST",
            seat_path("PeerMessages", pane),
            body=body,
            headers={"Content-Type": "application/json"},
        )
        r = conn.getresponse()
        value = json.loads(r.read() or b"null")
        code = value.get("error", {}).get("code") if isinstance(value, dict) else None
        write(where, {"status": r.status, "code": code})
elif sys.argv[1] == "time":
    rounds, out = int(sys.argv[2]), sys.argv[3]
    bare, full, again, kept = [], [], [], []
    for _ in range(rounds):
        t = time.perf_counter()
        c = connection()
        assert get(c, "/healthz")["status"] == 200
        bare.append((time.perf_counter() - t) * 1e3)
        c.close()
        t = time.perf_counter()
        c = connection()
        assert get(c, catalog)["status"] == 200
        full.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        assert get(c, catalog)["status"] == 200
        again.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        assert get(c, "/healthz")["status"] == 200
        kept.append((time.perf_counter() - t) * 1e3)
        c.close()
    write(out, {"bare": bare, "full": full, "recheck": again, "kept": kept})
elif sys.argv[1] == "loaded":
    rounds, out = int(sys.argv[2]), sys.argv[3]
    full, refused = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        c = connection()
        seen = get(c, catalog)
        took = (time.perf_counter() - t) * 1e3
        c.close()
        if seen["status"] == 200:
            full.append(took)
        else:
            refused.append(seen["code"] or str(seen["status"]))
    write(out, {"full": full, "refused": refused})
elif sys.argv[1] == "proofs":
    rounds, out = int(sys.argv[2]), sys.argv[3]
    for _ in range(rounds):
        c = connection()
        assert get(c, catalog)["status"] == 200
        c.close()
    write(out, {"rounds": rounds})
