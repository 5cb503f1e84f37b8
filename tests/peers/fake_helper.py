"""A deliberately imperfect census helper for queue tests (a test build).

It speaks the helper's pipe frames by hand: reads length-delimited Request
frames, answers each with a Reply carrying the same id and a Pong.

  python fake_helper.py delay SECONDS   answer every request after SECONDS
  python fake_helper.py garbage         answer with bytes that are no Reply
  python fake_helper.py wrong-id        answer with another request's id
  python fake_helper.py silent          read requests, never answer
Every start appends a line to $FAKE_HELPER_LOG when set.
"""
import os
import sys
import time


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(stream):
    shift = value = 0
    while True:
        b = stream.read(1)
        if not b:
            return None
        value |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return value
        shift += 7


def request_id(body: bytes) -> int:
    # Field 1 (id), varint: tag 0x08.
    if not body or body[0] != 0x08:
        return 0
    shift = value = 0
    for b in body[1:]:
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return value


def main() -> None:
    log = os.environ.get("FAKE_HELPER_LOG")
    if log:
        with open(log, "a") as f:
            f.write("start\n")
    mode = sys.argv[1]
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        n = read_varint(stdin)
        if n is None:
            return
        body = stdin.read(n)
        rid = request_id(body)
        if mode == "silent":
            continue
        if mode == "garbage":
            stdout.write(b"\x05\xff\xff\xff\xff\xff")
            stdout.flush()
            continue
        if mode == "wrong-id":
            rid += 1000
        time.sleep(delay)
        # Reply { id = rid (field 1), pong = Pong {} (field 2) }
        reply = b"\x08" + varint(rid) + b"\x12\x00"
        stdout.write(varint(len(reply)) + reply)
        stdout.flush()


main()
