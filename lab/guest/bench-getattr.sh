#!/bin/sh
# One round of lab/bench-getattr.sh, run in the guest from the share: on
# rxe0, perftest's ib_send_lat -R -e (2 bytes, event mode), then an NFSv3
# GETATTR round trip to the guest's own knfsd made by Linux's NFS/RDMA
# client (stat(2) of a mount with noac: one GETATTR per stat) and by our
# NFS client over the verbs provider (event mode), one call at a time.
# Prints "fig NAME VALUE" and "ratio NAME VALUE" lines: each GETATTR's
# median round trip over twice ib_send_lat's typical (median) latency,
# and ours over the kernel's. Every step is bounded by timeout(1).
#
# usage: bench-getattr.sh DIR   (DIR holds nfs.test)
B=${1:-/share}
D=rxe0
IP=10.0.3.15
export IP
M=/mnt/getattr
F=/tmp/bg.failed
rm -f $F
mkdir -p $M
timeout 60 mount -t nfs -o vers=3,proto=rdma,port=20049,noac,soft,timeo=100 $IP:/export $M || { echo "failed: mount"; exit 1; }
IP=$IP pt.sh ib_send_lat $D -R -F -n 2000 -e > /tmp/bg.pt 2>&1 || echo ib_send_lat >> $F
lat=$(awk '$1 == "cli|" && $2 == 2 { v = $6 } END { print v + 0 }' /tmp/bg.pt)
# gobench BENCH: the median round trip in us of one benchmark of nfs.test.
gobench() { RPCRDMA_VERBS_ADDR=$IP RPCRDMA_VERBS_DEVICE=$D RPCRDMA_KERNEL_NFS_PATH=$M timeout 300 "$B/nfs.test" \
              -test.run '^$' -test.bench "^$1\$" -test.benchtime 1000x -test.timeout 280s > /tmp/bg.go 2>&1 || echo "$1" >> $F
            awk '/^Benchmark/ { for (i = 1; i < NF; i++) if ($(i+1) == "p50-ns/op") v = $i / 1000 } END { print v + 0 }' /tmp/bg.go; }
kern=$(gobench BenchmarkKernelGetattr)
per=$(awk '/^Benchmark/ { for (i = 1; i < NF; i++) if ($(i+1) == "getattrs/op") v = $i } END { print v + 0 }' /tmp/bg.go)
echo "fig kernel.getattrs_per_stat $per"
ours=$(gobench BenchmarkVerbsGetattr)
timeout 60 umount $M
echo "fig perftest.send_lat_typical_us $lat"
echo "fig kernel.getattr_median_us $kern"
echo "fig ours.getattr_median_us $ours"
awk -v l="$lat" -v k="$kern" -v o="$ours" 'BEGIN {
    if (l > 0) { printf "ratio kernel.getattr_over_2x_send_lat %.3f\n", k / (2 * l)
                 printf "ratio ours.getattr_over_2x_send_lat %.3f\n", o / (2 * l) }
    if (k > 0) printf "ratio ours_over_kernel.getattr %.3f\n", o / k }'
if [ -s $F ]; then echo "failed: $(cat $F)"; cat /tmp/bg.pt /tmp/bg.go; exit 1; fi
