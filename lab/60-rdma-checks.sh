#!/bin/bash
# Smoke checks inside a booted lab guest (30-boot-vm.sh), each bounded in
# time:
#   1. ibv_devices lists rxe0 and siw0 (rdma-core and its provider plug-ins);
#   2. ib_send_lat -R (rdma_cm) completes over rxe0 (10.0.3.15) and over siw0
#      (10.0.2.15), and rxe0's packet counter shows that the right device
#      carried it;
#   3. the guest's NFS client mounts knfsd over RDMA through each device,
#      writes and reads back a file; /export-ro refuses a write.
# Usage: lab/60-rdma-checks.sh   Exit status: the number of failed checks.
set -uo pipefail
WORK=${WORK:-/tmp/rpcrdma-lab}
LAB=$(cd "$(dirname "$0")" && pwd)
export WORK
fail=0
# G 'command' [timeout]: run a command in the guest; count a failure. The
# channel takes one line, so newlines are folded into spaces (every
# statement below ends in ';', '&&' or '||').
G() {
    local c=${1//$'\n'/ } t=${2:-60}
    echo "### guest: $c"
    timeout $((t + 10)) "$LAB/guestctl.py" --timeout "$t" "$c"
    local rc=$?
    echo "### rc=$rc"
    [ "$rc" = 0 ] || fail=$((fail + 1))
}

G 'ibv_devices; ibv_devices | grep -qw rxe0 && ibv_devices | grep -qw siw0'

# With -R, rdma_cm picks the device by address, not by -d (and perftest's
# "Transport type" line follows -d, so it does not tell). rxe0 counts its
# packets, siw0 does not: over 10.0.3.15 rxe0's sent_pkts must move, over
# 10.0.2.15 it must not (so siw0, the only other device, carried it).
for a in "rxe0 10.0.3.15 -gt" "siw0 10.0.2.15 -eq"; do
    set -- $a
    G "p=/sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts; c0=\$(cat \$p);
       IP=$2 pt.sh ib_send_lat $1 -R -F -n 200 && c1=\$(cat \$p) &&
       echo \"rxe0 sent_pkts \$c0 -> \$c1\" && [ \$c1 $3 \$c0 ] &&
       echo '$1: ib_send_lat -R over $2 ran on $1'" 150
done

for a in "rxe0 10.0.3.15" "siw0 10.0.2.15"; do
    set -- $a
    G "mkdir -p /mnt/$1 &&
       timeout 60 mount -t nfs -o vers=3,proto=rdma,port=20049,soft,timeo=100,retrans=2 $2:/export /mnt/$1 &&
       rdma res show cm_id | grep -v LISTEN | grep -w $1 | head -n 2 &&
       dd if=/dev/urandom of=/tmp/f.$1 bs=1M count=2 2>/dev/null &&
       cp /tmp/f.$1 /mnt/$1/f.$1 && sync && echo 3 > /proc/sys/vm/drop_caches &&
       cmp /tmp/f.$1 /mnt/$1/f.$1 && cmp /tmp/f.$1 /export/f.$1 && echo \"$1: 2 MiB written and read back over NFS/RDMA\";
       rc=\$?; rm -f /export/f.$1 /tmp/f.$1; umount /mnt/$1; exit \$rc" 120
done

G "mkdir -p /mnt/ro && timeout 60 mount -t nfs -o vers=3,proto=rdma,port=20049,soft 10.0.3.15:/export-ro /mnt/ro &&
   cat /mnt/ro/readme.txt && ! touch /mnt/ro/x 2>/dev/null; rc=\$?; umount /mnt/ro; [ \$rc = 0 ] && echo '/export-ro: read-only'; exit \$rc" 90

G 'dmesg | grep -E "BUG:|Oops|WARNING:|general protection" && exit 1; echo "dmesg: no BUG, Oops or WARNING"'
echo "60-rdma-checks: $fail failed"
exit "$fail"
