#!/bin/bash
# Build and boot the lab from nothing, run the guest smoke checks, and leave
# the VM running for the tests (lab/90-stop-vm.sh stops it).
#
# Usage: lab/run-all.sh      (as root, or as a user with sudo for 00-deps.sh)
#
# WORK (default /tmp/rpcrdma-lab) holds every build product and log;
# $WORK/timings.txt gets the time of each step.
set -euo pipefail
LAB=$(cd "$(dirname "$0")" && pwd)
export WORK=${WORK:-/tmp/rpcrdma-lab}
SUDO=
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo env WORK=$WORK"; fi
mkdir -p "$WORK"
: > "$WORK/timings.txt"
# t LOG CMD...: run CMD with its output in $WORK/LOG, and record its time.
t() {
    local log=$1 s e rc=0; shift
    s=$(date +%s.%N)
    "$@" > "$WORK/$log" 2>&1 || rc=$?
    e=$(date +%s.%N)
    printf '%-22s %6.1fs  rc=%d\n' "$log" "$(awk "BEGIN { print $e - $s }")" "$rc" | tee -a "$WORK/timings.txt"
    if [ "$rc" != 0 ]; then echo "failed; the end of $WORK/$log:" >&2; tail -n 20 "$WORK/$log" >&2; exit "$rc"; fi
}
t 00-deps.log $SUDO "$LAB/00-deps.sh"
t 10-build-siw.log "$LAB/10-build-siw.sh"
t 20-build-initramfs.log "$LAB/20-build-initramfs.sh"
"$LAB/90-stop-vm.sh" >/dev/null
t 30-boot-vm.log "$LAB/30-boot-vm.sh"
t 60-rdma-checks.log "$LAB/60-rdma-checks.sh"
grep 'boot to LAB-READY' "$WORK/30-boot-vm.log"
echo "lab VM running (WORK=$WORK); stop it with $LAB/90-stop-vm.sh"
