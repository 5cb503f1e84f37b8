"""A Herdr 0.8 (protocol 20) socket-API fixture for client tests.

It listens on a Unix socket, reads newline-delimited JSON requests, checks
each against the request schema of the real protocol
(tests/fixtures/herdr-api.schema.json), checks its own answers against the
response schemas, and answers like the recorded Herdr 0.8.0 transcript.

  python herdr_fixture.py SOCKET PANES_JSON VIOLATIONS_LOG [ACTS_LOG]
PANES_JSON maps pane ids to shell pids, e.g. {"w1:p1": 1234}.
Every schema violation is appended to VIOLATIONS_LOG. pane.split,
pane.send_text and pane.close change the fixture's panes and, with ACTS_LOG,
are recorded there as JSON lines {"method", "params"}, as are the agent
session reports (pane.report_agent_session).

`events.subscribe` keeps its connection open: after its answer, each event
subscribed to goes to it as one line {"event", "data"} (dotted names in,
underscored out, as Herdr 0.8 does), checked against the event schema.
pane.close sends `pane_closed` and pane.split `pane_created`.

Session reports are kept or dropped as a real Herdr 0.8 does
(shared/herdr/session-reports.md): every well-formed report is answered ok,
but one is kept only when its source is Herdr's own for its agent
(`herdr:<agent>`), carries a rising `seq` (unless the pane's session is
already anchored), and the agent is what Herdr's foreground detection sees
in the pane. What the detection sees is HERDR_FIXTURE_AGENTS_FILE's JSON map
of pane id to agent, when set. `pane.get` answers the pane's `agent` and the
`agent_session` kept, so a test reads back what a real Herdr would hold.
"""
import json
import os
import socket
import sys
import threading

from jsonschema import Draft202012Validator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = json.load(open(os.path.join(HERE, "..", "fixtures", "herdr-api.schema.json")))


def validator(name):
    doc = dict(ROOT)
    doc["$ref"] = f"#/schemas/{name}"
    return Draft202012Validator(doc)


REQUEST = validator("request")
EVENT = validator("event")
SUCCESS = validator("success_response")
ERROR = validator("error_response")


def status():
    """The agent status to report: HERDR_FIXTURE_STATUS_FILE's content, if set."""
    path = os.environ.get("HERDR_FIXTURE_STATUS_FILE")
    if path and os.path.exists(path):
        return open(path).read().strip() or "unknown"
    return "unknown"


def pane(pid_map, pane_id):
    ws, _, _ = pane_id.partition(":")
    return {
        "pane_id": pane_id,
        "terminal_id": "term_fixture",
        "workspace_id": ws,
        "tab_id": f"{ws}:t1",
        "focused": False,
        "cwd": "/tmp",
        "foreground_cwd": "/tmp",
        "agent_status": status(),
        "agent": detected(pane_id),
        "agent_session": SESSIONS.get(pane_id),
        "scroll": {"offset_from_bottom": 0, "max_offset_from_bottom": 0, "viewport_rows": 24},
        "revision": 0,
    }


ACTS = None
LOCK = threading.Lock()
# Subscribed connections: (socket, dotted event types, its write lock).
SUBSCRIBERS = []
LOG = None
# pane id -> the agent session kept for it, and the last seq taken.
SESSIONS = {}
SEQS = {}


def detected(pane_id):
    """The agent Herdr's foreground detection sees in the pane, if any."""
    path = os.environ.get("HERDR_FIXTURE_AGENTS_FILE")
    if path and os.path.exists(path):
        try:
            return json.load(open(path)).get(pane_id)
        except ValueError:
            return None
    return None


def keep_report(params):
    """Keeps a session report the way Herdr 0.8 does; True when kept."""
    pane_id, source, agent = params.get("pane_id"), params.get("source"), params.get("agent")
    if source != f"herdr:{agent}" or detected(pane_id) != agent:
        return False
    seq = params.get("seq")
    if seq is None and pane_id not in SESSIONS:
        return False
    if seq is not None and seq <= SEQS.get(pane_id, -1):
        return False
    path, sid = params.get("agent_session_path"), params.get("agent_session_id")
    if not path and not sid:
        return False
    SESSIONS[pane_id] = {"source": source, "agent": agent,
                         "kind": "path" if path else "id", "value": path or sid}
    if seq is not None:
        SEQS[pane_id] = seq
    return True


def act(req):
    if ACTS:
        with open(ACTS, "a") as f:
            f.write(json.dumps({"method": req.get("method"), "params": req.get("params")}) + "\n")


def publish(kind, data):
    """Sends one event to every connection subscribed to it."""
    line = {"event": kind, "data": dict(data, type=kind)}
    for e in EVENT.iter_errors(line):
        note(LOG, f"fixture event {kind}: {e.message}")
    dotted = kind.replace("_", ".", 1)
    with LOCK:
        subscribers = list(SUBSCRIBERS)
    for conn, kinds, lock in subscribers:
        if dotted in kinds:
            try:
                with lock:
                    conn.sendall((json.dumps(line) + "\n").encode())
            except OSError:
                pass


def answer(req, panes):
    method, params, rid = req.get("method"), req.get("params", {}), req.get("id")
    if method == "pane.split":
        act(req)
        with LOCK:
            target = params.get("target_pane_id")
            if target not in panes:
                return {"id": rid, "error": {"code": "pane_not_found", "message": f"pane {target} not found"}}
            ws = target.partition(":")[0]
            n = 1 + max(int(p.rpartition("p")[2]) for p in panes if p.startswith(ws + ":"))
            new = f"{ws}:p{n}"
            panes[new] = os.getpid()
        publish("pane_created", {"pane": pane(panes, new)})
        return {"id": rid, "result": {"type": "pane_info", "pane": pane(panes, new)}}
    if method == "pane.send_text":
        act(req)
        if params.get("pane_id") not in panes:
            return {"id": rid, "error": {"code": "pane_not_found", "message": "pane not found"}}
        return {"id": rid, "result": {"type": "ok"}}
    if method == "pane.close":
        act(req)
        with LOCK:
            if panes.pop(params.get("pane_id"), None) is None:
                return {"id": rid, "error": {"code": "pane_not_found", "message": "pane not found"}}
        closed = params.get("pane_id")
        publish("pane_closed", {"pane_id": closed, "workspace_id": closed.partition(":")[0]})
        return {"id": rid, "result": {"type": "ok"}}
    if method == "pane.report_agent_session":
        act(req)
        if params.get("pane_id") not in panes:
            return {"id": rid, "error": {"code": "pane_not_found", "message": "pane not found"}}
        with LOCK:
            keep_report(params)
        # Kept or dropped, the answer is the same: only pane.get tells.
        return {"id": rid, "result": {"type": "ok"}}
    if method == "ping":
        return {"id": rid, "result": {"type": "pong", "version": "0.8.0", "protocol": 20,
                                      "capabilities": {"live_handoff": True, "detached_server_daemon": True}}}
    if method == "pane.list":
        return {"id": rid, "result": {"type": "pane_list", "panes": [pane(panes, p) for p in panes]}}
    pane_id = params.get("pane_id")
    if method in ("pane.get", "pane.process_info") and pane_id not in panes:
        return {"id": rid, "error": {"code": "pane_not_found", "message": f"pane {pane_id} not found"}}
    if method == "pane.get":
        return {"id": rid, "result": {"type": "pane_info", "pane": pane(panes, pane_id)}}
    if method == "pane.process_info":
        pid = panes[pane_id]
        return {"id": rid, "result": {"type": "pane_process_info", "process_info": {
            "pane_id": pane_id, "shell_pid": pid, "foreground_process_group_id": pid,
            "foreground_processes": [{"pid": pid, "name": "bash", "argv": ["/bin/bash"],
                                      "cmdline": "/bin/bash", "cwd": "/tmp"}]}}}
    return {"id": rid, "error": {"code": "unsupported", "message": f"fixture does not serve {method}"}}


def serve(conn, panes, log):
    lock = threading.Lock()
    with conn, conn.makefile("rb") as lines:
        for raw in lines:
            try:
                req = json.loads(raw)
            except ValueError:
                note(log, "request is not JSON")
                continue
            for e in REQUEST.iter_errors(req):
                note(log, f"request {req.get('method')}: {e.message}")
            if req.get("method") == "events.subscribe":
                kinds = {s.get("type") for s in req.get("params", {}).get("subscriptions", [])}
                resp = {"id": req.get("id"), "result": {"type": "subscription_started"}}
            else:
                resp = answer(req, panes)
            check = ERROR if "error" in resp else SUCCESS
            for e in check.iter_errors(resp):
                note(log, f"fixture response {req.get('method')}: {e.message}")
            with lock:
                # Subscribed before the answer leaves, so no event is lost
                # and none overtakes it.
                if req.get("method") == "events.subscribe":
                    with LOCK:
                        SUBSCRIBERS.append((conn, kinds, lock))
                conn.sendall((json.dumps(resp) + "\n").encode())
    with LOCK:
        SUBSCRIBERS[:] = [s for s in SUBSCRIBERS if s[0] is not conn]


def note(log, line):
    with open(log, "a") as f:
        f.write(line + "\n")


def main():
    global ACTS, LOG
    path, panes, log = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    LOG = log
    ACTS = sys.argv[4] if len(sys.argv) > 4 else None
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, panes, log), daemon=True).start()


main()
