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
RUNS=${1:-3}
. lab/rounds.sh
rounds_dir bench-verbs
CGO_ENABLED=1 go test -c -tags verbs -o "$D/verbs.test" ./rdma/verbs
CGO_ENABLED=1 go test -c -tags verbs -o "$D/rpcrdma.test" ./rpcrdma
rounds bench-verbs.sh "$RUNS"
