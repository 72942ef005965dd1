#!/bin/sh
# Our NFSv4.1 client against our NFSv3 client and against the Linux kernel's
# NFSv4.1 client, all in the lab guest, reading and writing the guest's
# knfsd export over rxe0 (Soft-RoCE), ours with the verbs provider: builds
# cmd/rpcrdma with -tags verbs into the share, runs guest/bench-nfs41.sh in
# the guest RUNS times and prints every figure's and ratio's median and
# range over the runs:
#   v41_over_v3.read_MBps, v41_over_v3.write_MBps: rpcrdma nfs bench --vers
#                4.1 over --vers 3, 1 MiB sequential, 8 in flight, one
#                connection, the two versions in turn in each run (goal: at
#                least 0.9);
#   ours1_over_kernel.randread_iops, ours4_over_kernel.randread_iops: 4 KiB
#                random READ, 32 in flight; ours over one connection
#                (--iodepth 32) and over four of one session (--numjobs 4
#                --iodepth 8) over fio (libaio, direct=1, iodepth 32) on the
#                kernel's vers=4.1,proto=rdma mount of the same export;
# with each side's CPU per operation (its own, and the whole guest's).
# The guest is qemu TCG: compare figures only as ratios taken in one run.
#
# usage: lab/bench-nfs41.sh [RUNS]   (default 5; the VM must be running,
# booted from an initramfs with fio: 20-build-initramfs.sh)
set -eu
cd "$(dirname "$0")/.."
RUNS=${1:-5}
. lab/rounds.sh
rounds_dir bench-nfs41
CGO_ENABLED=1 go build -tags verbs -o "$D/rpcrdma" ./cmd/rpcrdma
rounds bench-nfs41.sh "$RUNS"
