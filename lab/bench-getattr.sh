#!/bin/sh
# An NFSv3 GETATTR round trip to Linux's knfsd, in the lab guest on rxe0
# (Soft-RoCE), made by Linux's own NFS/RDMA client and by this project's
# NFS client over the verbs provider, beside perftest's ib_send_lat -R -e:
# builds the nfs test binary with -tags verbs into the share, runs
# guest/bench-getattr.sh in the guest RUNS times (each run measures all
# three one after the other), and prints every figure's and ratio's median
# and range over the runs:
#   kernel.getattr_over_2x_send_lat, ours.getattr_over_2x_send_lat: the
#                median GETATTR round trip over twice ib_send_lat's
#                typical (median) half round trip, event mode;
#   ours_over_kernel.getattr: ours over Linux's.
#
# usage: lab/bench-getattr.sh [RUNS]   (default 3; the VM must be running)
set -eu
cd "$(dirname "$0")/.."
RUNS=${1:-3}
. lab/rounds.sh
rounds_dir bench-getattr
CGO_ENABLED=1 go test -c -tags verbs -o "$D/nfs.test" ./nfs
rounds bench-getattr.sh "$RUNS"
