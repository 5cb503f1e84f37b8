"""A stand-in for a coding agent in a pane: runs in the foreground of an
interactive shell and starts one child (where an agent would start its MCP
bridge); writes the child's pid to OUT and waits.

Usage: python seat_agent.py OUT [extra launcher args...] [-- CHILD...]
The child is CHILD when given (a real MCP client), else `sleep 300`.
"""
import os
import subprocess
import sys
import time

out = sys.argv[1]
rest = sys.argv[2:]
child_cmd = rest[rest.index("--") + 1:] if "--" in rest else ["sleep", "300"]
child = subprocess.Popen(child_cmd)
with open(out + ".tmp", "w") as f:
    f.write(str(child.pid))
os.rename(out + ".tmp", out)
time.sleep(300)
