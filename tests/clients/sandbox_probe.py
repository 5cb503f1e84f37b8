"""What a hired worker can reach, seen from inside its pane. Run as a hire's
command; writes one JSON object to the config's "out" and stays open.

Usage: python sandbox_probe.py CONFIG_JSON

The config names what to try (all paths as the owner sees them):
  out, state, hidden, creds_file, pids (list), tmux, workspace, profile,
  home, other_tty, files (name -> a file the services run or read later),
  dirs (name -> a folder to plant a new file in), link_from (a protected
  file to hard-link into the workspace).

What it tries:
- the owner credential, read directly; every path under the state folder;
- a connect to each internal socket, and to the local MCP socket;
- what the hidden folder holds, and what the credentials file reads as;
- renaming the state folder and its parent;
- whether the stack's service processes are visible at all;
- a connect to the linked tmux server;
- opening each named file for writing (never writing a byte) and creating
  a file in each named folder: the stack's binaries, git, tmux, bwrap, an
  upstream's script, its packages and its interpreter;
- a hard link from a protected file into the workspace;
- what a root-run hire could reach: a sysctl, /etc, libc, a cgroup file;
- the terminals: every one in /dev/pts, and another pane's;
- writing in the workspace, the profile, /tmp and the home folder;
- a forked child writing on its parent's connection while naming the
  parent in SCM_CREDENTIALS (a forgery only CAP_SYS_ADMIN may make).
"""
import errno
import glob
import json
import os
import socket
import struct
import sys
import time

cfg = json.load(open(sys.argv[1]))
state = cfg["state"]
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


def open_for_writing(path):
    # O_WRONLY without O_TRUNC: the permission is checked, nothing written.
    try:
        os.close(os.open(path, os.O_WRONLY))
    except OSError as e:
        # A running program refuses writers (ETXTBSY) before its mount is
        # asked; it would take them once it stops, unless the mount is
        # read-only.
        if e.errno == errno.ETXTBSY and os.statvfs(path).f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, "read-only mount") from e
        raise


def create_in(folder):
    path = os.path.join(folder, f".clankie-probe-{os.getpid()}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    os.unlink(path)


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
hidden = cfg["hidden"]
seen["hidden"] = sorted(os.listdir(hidden)) if os.path.isdir(hidden) else None
try:
    seen["credentials_file"] = open(cfg["creds_file"]).read()
except OSError as e:
    seen["credentials_file"] = errno.errorcode.get(e.errno, "error")
seen["rename_state"] = outcome(lambda: os.rename(state, state + ".moved"))
seen["services_visible"] = [p for p in cfg["pids"] if os.path.exists(f"/proc/{p}")]
seen["tmux"] = outcome(lambda: connect(cfg["tmux"]))
seen["files"] = {k: outcome(lambda p=p: open_for_writing(p)) for k, p in cfg["files"].items()}
seen["dirs"] = {k: outcome(lambda p=p: create_in(p)) for k, p in cfg["dirs"].items()}
seen["hard_link"] = outcome(
    lambda: os.link(cfg["link_from"], os.path.join(cfg["workspace"], "linked"))
)

cgroups = sorted(glob.glob("/sys/fs/cgroup/**/cgroup.procs", recursive=True))[:1]
seen["root"] = {
    "core_pattern": outcome(lambda: open_for_writing("/proc/sys/kernel/core_pattern")),
    "sysrq": outcome(lambda: open_for_writing("/proc/sysrq-trigger")),
    "etc": outcome(lambda: create_in("/etc")),
    "libc": outcome(
        lambda: open_for_writing(
            sorted(glob.glob("/lib/*/libc.so.6") + glob.glob("/usr/lib/*/libc.so.6"))[0]
        )
    ),
    "cgroup": outcome(lambda: open_for_writing(cgroups[0])) if cgroups else "ENOENT",
    "block_device": "ok" if glob.glob("/dev/[sv]d*") + glob.glob("/dev/nvme*") else "ENOENT",
}
seen["pts"] = sorted(os.listdir("/dev/pts")) if os.path.isdir("/dev/pts") else None
seen["other_tty"] = outcome(lambda: os.close(os.open(cfg["other_tty"], os.O_RDWR | os.O_NOCTTY)))
seen["own_tty"] = os.ttyname(0) if os.isatty(0) else None
seen["write"] = {
    "workspace": outcome(lambda: create_in(cfg["workspace"])),
    "profile": outcome(lambda: create_in(cfg["profile"])),
    "home": outcome(lambda: create_in(cfg["home"])),
}
marker = f"/tmp/clankie-probe-{os.urandom(8).hex()}"
seen["tmp"] = outcome(lambda: open(marker, "w").write("x"))
seen["tmp_marker"] = marker


def forged():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(state, "run", "fleet", "mcp.sock"))
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        creds = struct.pack("iII", os.getppid(), os.getuid(), os.getgid())
        try:
            s.sendmsg([b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"],
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
out = cfg["out"]
with open(out + ".tmp", "w") as f:
    json.dump(seen, f)
os.rename(out + ".tmp", out)
time.sleep(600)
