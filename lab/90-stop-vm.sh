#!/bin/bash
# Stop the lab VM: QEMU monitor "quit", then SIGTERM to the pid in qemu.pid.
# Usage: lab/90-stop-vm.sh
WORK=${WORK:-/tmp/rpcrdma-lab}
cd "$WORK" 2>/dev/null || exit 0
[ -f qemu.pid ] || { echo "no VM"; exit 0; }
pid=$(cat qemu.pid)
if kill -0 "$pid" 2>/dev/null; then
    if [ -S mon.sock ]; then
        python3 - <<'X' || true
import socket, time
s = socket.socket(socket.AF_UNIX)
s.connect("mon.sock")
s.sendall(b"quit\n")
time.sleep(0.5)
X
    fi
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.3; done
    kill -0 "$pid" 2>/dev/null && kill "$pid"
fi
rm -f qemu.pid share-dir
echo "VM stopped"
