"""Shares one connection to the gateway's local listener with a forked
child, and records the HTTP status of each request and who sent it.

Usage: python shared_fd.py unix|tcp|reused STATE_DIR OUT

- tcp: the child is forked right after connecting and only holds the
  descriptor; the parent then sends a request. A full proof sees two holders.
- unix: the parent sends a request (proven), then the child sends one on the
  shared descriptor, then the parent once more.
- reused (root only): a child connects and is proven, hands the descriptor
  to this process and exits; a new process is then made to get the dead
  child's very pid (through ns_last_pid) and writes on the descriptor. By
  pid number it is the process that connected; by identity it is not.
"""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import discovery  # noqa: E402
from harness.seat_files import write_json  # noqa: E402

# A notification with no session: admitted, the MCP service answers it with a
# plain JSON client error; refused, admission answers 403 or 503 first.
BODY = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()


def request(sock: socket.socket) -> dict:
    head = (
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode()
    sock.sendall(head + BODY)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    header, _, rest = data.partition(b"\r\n\r\n")
    lines = header.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1])
    fields = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
    length = int(fields.get("content-length", fields.get("Content-Length", "0")))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    code = None
    if status >= 400:
        try:
            code = json.loads(rest[:length]).get("error", {}).get("code")
        except ValueError:
            pass
    return {"status": status, "code": code}


def connect(mode: str, state: str) -> socket.socket:
    disc = discovery.gateway(state)
    if mode == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(disc["unix"])
    else:
        s = socket.create_connection(discovery.local_tcp(disc))
    return s


def in_child(act) -> tuple:
    """Forks; the child runs `act` and hands its answer (a dict, or None for
    nothing) back through a pipe. Returns the child's pid and the answer."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        answer = act()
        if answer is not None:
            os.write(w, json.dumps(answer).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(child, 0)
    return child, json.loads(data) if data else None


def reused(state: str) -> dict:
    seen = {}
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    member = os.fork()
    if member == 0:
        s = connect("unix", state)
        answer = request(s)
        socket.send_fds(there, [json.dumps(answer).encode()], [s.fileno()])
        os._exit(0)
    msg, fds, _, _ = socket.recv_fds(here, 4096, 1)
    seen["member_first"] = json.loads(msg)
    os.waitpid(member, 0)
    shared = socket.socket(fileno=fds[0])
    for attempt in range(200):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(member - 1))
        child, answer = in_child(lambda: request(shared) if os.getpid() == member else None)
        if child == member:
            seen["same_pid_new_process"] = answer
            seen["attempts"] = attempt + 1
            break
    return seen


def main() -> None:
    mode, state, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "reused":
        write_json(out, reused(state))
        return
    s = connect(mode, state)
    seen = {}
    if mode == "tcp":
        child = os.fork()
        if child == 0:
            time.sleep(30)
            os._exit(0)
        seen["parent_with_child_holding"] = request(s)
        os.kill(child, 9)
        os.waitpid(child, 0)
    else:
        seen["parent_first"] = request(s)
        _, seen["child_on_shared"] = in_child(lambda: request(s))
        seen["parent_after"] = request(s)
    write_json(out, seen)


main()
