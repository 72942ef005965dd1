#!/bin/sh
# Run one perftest pair inside the guest: a server in the background and a
# client to $IP, both bounded by timeout(1).
#
# usage: [IP=10.0.2.15] pt.sh TOOL DEV [perftest args...]
#   e.g. IP=10.0.3.15 pt.sh ib_send_lat rxe0 -R -F -n 200
#
# Prints the client's result lines, its wall time, and every device's sent
# packet counter before and after: with -R, rdma_cm picks the device from the
# IP address, not from -d, so the counters show which device really carried
# the traffic. Exits non-zero if the client or the server failed.
T=$1; D=$2; shift 2
IP=${IP:-10.0.2.15}
up() { cut -d' ' -f1 /proc/uptime; }
cnt() { for d in /sys/class/infiniband/*; do
          printf '%s:%s ' "${d##*/}" "$(cat "$d/ports/1/hw_counters/sent_pkts" 2>/dev/null || echo -)"; done; }
c0=$(cnt)
timeout 120 "$T" -d "$D" "$@" > "/tmp/srv.$T.$D.log" 2>&1 &
SP=$!
sleep 1
t0=$(up)
timeout 110 "$T" -d "$D" "$@" "$IP" > "/tmp/cli.$T.$D.log" 2>&1
rc=$?
t1=$(up)
wait $SP; src=$?
echo "== $T -d $D $* $IP: client rc=$rc server rc=$src wall=$(echo "$t1 $t0" | awk '{printf "%.2f", $1-$2}')s"
echo "   sent_pkts before: $c0 after: $(cnt)"
grep -E 'Transport type|GID index' "/tmp/srv.$T.$D.log" | sed 's/^/  srv| /'
grep -E '^ +[0-9]+ +[0-9]+ |rror|ailed|Couldn|Unable' "/tmp/cli.$T.$D.log" | sed 's/^/  cli| /'
[ "$rc" = 0 ] && [ "$src" = 0 ]
