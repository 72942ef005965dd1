#!/bin/sh
# The verbs provider beside perftest, in the lab guest, on rxe0: builds the
# test binaries of rdma/verbs and rpcrdma with -tags verbs into the share,
# runs guest/bench-verbs.sh in the guest RUNS times (each run measures
# perftest and ours one after the other in the same guest), and prints
# every ratio's median and range over the runs:
#   write, read: our 1 MiB RDMA Write/Read bandwidth over ib_write_bw -R /
#                ib_read_bw -R (target at least 0.9);
#   null_over_2x_send_lat: rpcrdma's median NULL round trip over twice
#                ib_send_lat -R's typical (median) latency (target at most
#                1.5); null_mean_over_2x_send_lat: our mean over the same;
# each in event mode (perftest -e; our default) and polling mode (perftest's
# default; our Options.BusyPoll negative, polling only).
#
# usage: lab/bench-verbs.sh [RUNS]   (default 3; the VM must be running)
set -eu
cd "$(dirname "$0")/.."
WORK=${WORK:-/tmp/rpcrdma-lab}
RUNS=${1:-3}
SHARE=$(cat "$WORK/share-dir")
D=$(mktemp -d "$SHARE/bench-verbs.XXXXXX")
trap 'rm -rf "$D"' EXIT
CGO_ENABLED=1 go test -c -tags verbs -o "$D/verbs.test" ./rdma/verbs
CGO_ENABLED=1 go test -c -tags verbs -o "$D/rpcrdma.test" ./rpcrdma
cp lab/guest/bench-verbs.sh "$D/"
chmod -R a+rX "$D"
G=/share/$(basename "$D")
OUT=$(mktemp)
trap 'rm -rf "$D" "$OUT"' EXIT
i=1
while [ "$i" -le "$RUNS" ]; do
    echo "== run $i of $RUNS"
    lab/guestctl.py --timeout 900 "timeout 880 sh $G/bench-verbs.sh $G" | tee -a "$OUT"
    i=$((i + 1))
done
echo "== over $RUNS runs: median [min, max]"
grep -E '^(ratio|fig) ' "$OUT" | sort -k2,2 -k3,3g | awk '
    { k = $1 " " $2; v[k, ++n[k]] = $3; if (!(k in seen)) { seen[k] = 1; keys[++m] = k } }
    END { for (j = 1; j <= m; j++) { k = keys[j]; c = n[k]
            med = (c % 2) ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2
            printf "%-50s %10.3f  [%.3f, %.3f]\n", k, med, v[k, 1], v[k, c] } }'
