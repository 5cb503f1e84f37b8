"""A Herdr 0.8 (protocol 20) socket-API fixture for client tests.

It listens on a Unix socket, reads newline-delimited JSON requests, checks
each against the request schema of the real protocol
(tests/fixtures/herdr-api.schema.json), checks its own answers against the
response schemas, and answers like the recorded Herdr 0.8.0 transcript.

  python herdr_fixture.py SOCKET PANES_JSON VIOLATIONS_LOG
PANES_JSON maps pane ids to shell pids, e.g. {"w1:p1": 1234}.
Every schema violation is appended to VIOLATIONS_LOG.
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
SUCCESS = validator("success_response")
ERROR = validator("error_response")


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
        "agent_status": "unknown",
        "scroll": {"offset_from_bottom": 0, "max_offset_from_bottom": 0, "viewport_rows": 24},
        "revision": 0,
    }


def answer(req, panes):
    method, params, rid = req.get("method"), req.get("params", {}), req.get("id")
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
    with conn, conn.makefile("rb") as lines:
        for raw in lines:
            try:
                req = json.loads(raw)
            except ValueError:
                note(log, "request is not JSON")
                continue
            for e in REQUEST.iter_errors(req):
                note(log, f"request {req.get('method')}: {e.message}")
            resp = answer(req, panes)
            check = ERROR if "error" in resp else SUCCESS
            for e in check.iter_errors(resp):
                note(log, f"fixture response {req.get('method')}: {e.message}")
            conn.sendall((json.dumps(resp) + "\n").encode())


def note(log, line):
    with open(log, "a") as f:
        f.write(line + "\n")


def main():
    path, panes, log = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, panes, log), daemon=True).start()


main()
