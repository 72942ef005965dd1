#!/usr/bin/env python3
"""Run one shell command in the lab guest over its command channel.

usage: lab/guestctl.py [--timeout SECONDS] 'command line'

The guest's /init reads one line at a time from ttyS1 (qemu connects it to
$WORK/ctl.sock), runs it with sh -c and answers with its output and a line
"__END__ rc=N". A multi-line script must be folded into one line. Prints the
output and exits with the command's status, or 124 if no answer came within
the timeout (default 60 s; the command may still be running in the guest).
Commands run one at a time: it holds a lock on $WORK/ctl.lock, as
internal/lab.Run does from Go.
"""
import fcntl
import os
import re
import socket
import sys
import time

WORK = os.environ.get("WORK", "/tmp/rpcrdma-lab")


def run(cmd, timeout=60.0):
    # One command at a time: internal/lab.Run takes the same flock(2) lock.
    lock = open(os.path.join(WORK, "ctl.lock"), "a+")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        return _run(cmd, timeout)
    finally:
        lock.close()


def _run(cmd, timeout):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # qemu's socket takes one client at a time and answers EAGAIN meanwhile.
    end = time.time() + 30
    while True:
        try:
            s.connect(os.path.join(WORK, "ctl.sock"))
            break
        except BlockingIOError:
            if time.time() > end:
                raise
            time.sleep(0.1)
    s.settimeout(0.2)
    try:  # drop what an earlier, interrupted command left behind
        while s.recv(65536):
            pass
    except socket.timeout:
        pass
    s.sendall(cmd.encode() + b"\n")
    buf = b""
    end = time.time() + timeout
    pat = re.compile(rb"__END__ rc=(\d+)\n")
    while time.time() < end:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        if not d:
            break
        buf += d
        m = pat.search(buf)
        if m:
            s.close()
            return buf[: m.start()].decode(errors="replace"), int(m.group(1))
    s.close()
    return buf.decode(errors="replace"), 124


if __name__ == "__main__":
    args = sys.argv[1:]
    t = 60.0
    if args[:1] == ["--timeout"]:
        t = float(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__)
    out, rc = run(" ".join(args), t)
    sys.stdout.write(out)
    sys.exit(rc)
