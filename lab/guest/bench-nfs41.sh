#!/bin/sh
# One round of lab/bench-nfs41.sh, run in the guest from the share, against
# the guest's knfsd over rxe0 (Soft-RoCE), our client using the verbs
# provider:
#  1. our NFSv3 and our NFSv4.1 client, 1 MiB sequential WRITE then READ
#     (rpcrdma nfs bench --bs 1m, 8 in flight, one connection), the two
#     versions in turn (v3 first in odd rounds, v4.1 first in even ones);
#  2. 4 KiB random READ of a 64 MiB file, 32 in flight: the guest kernel's
#     client (fio, libaio, direct=1, iodepth 32, on a vers=4.1,proto=rdma
#     mount), then ours over one connection (--iodepth 32) and over four
#     connections of one session (--numjobs 4 --iodepth 8: 32 in all).
# Prints "fig NAME VALUE" and "ratio NAME VALUE" lines. Besides MB/s and
# IOPS: each client's own CPU per operation (ours: the bench's getrusage,
# "cpu µs/op"; the kernel's: fio's usr+sys of its job), the user share of
# that CPU, and the whole guest's busy CPU per operation (/proc/stat, both
# vCPUs, client, knfsd and rxe together, over the whole command, start-up
# included). Every step is bounded by timeout(1). The round number, kept in
# /tmp/bn.round, lives as long as the guest.
#
# usage: bench-nfs41.sh DIR   (DIR holds rpcrdma, built with -tags verbs)
B=${1:-/share}
IP=10.0.3.15
ST=10   # seconds of each 1 MiB workload
RT=5    # seconds of each random READ workload
M=/mnt/bench41
F=/tmp/bn.failed
rm -f $F
# busy: the guest's busy CPU time so far, in clock ticks (1/100 s).
busy() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# ours NAME SECONDS ARGS...: one rpcrdma nfs bench over rxe0, each workload
# measured for SECONDS; prints, for each workload of its table,
# NAME.OP_MBps, NAME.OP_iops and NAME.OP_cpu_us_per_op, and with one
# workload NAME.OP_guest_cpu_us_per_op and NAME.user_share_of_cpu (user time
# over user and system time of the whole command, from busybox time).
ours() {
    n=$1
    t=$2
    shift 2
    b0=$(busy)
    timeout 300 busybox time -f '%U %S' -o /tmp/bn.time "$B/rpcrdma" nfs bench --provider verbs --device rxe0 \
        --runtime "${t}s" "$@" > /tmp/bn.out 2> /tmp/bn.err || { echo "$n" >> $F; cat /tmp/bn.out /tmp/bn.err; }
    b1=$(busy)
    awk -v n="$n" -v busy=$((b1 - b0)) -v us="$(cat /tmp/bn.time)" '
        $1 == "rdma" && ($2 == "READ" || $2 == "WRITE") {
            op = tolower($2); rows++
            printf "fig %s.%s_MBps %s\nfig %s.%s_iops %s\nfig %s.%s_cpu_us_per_op %s\n", n, op, $9, n, op, $8, n, op, $NF
            last = op; ops = $7 }
        END { if (rows != 1 || ops == 0) exit
              printf "fig %s.%s_guest_cpu_us_per_op %.1f\n", n, last, busy * 10000 / ops
              split(us, c, " "); if (c[1] + c[2] > 0) printf "fig %s.user_share_of_cpu %.3f\n", n, c[1] / (c[1] + c[2]) }' /tmp/bn.out
}
# 1. v3 against v4.1, 1 MiB.
r=$(($(cat /tmp/bn.round 2>/dev/null || echo 0) + 1))
echo $r > /tmp/bn.round
seq1() {
    case $1 in
    3) ours v3 $ST --vers 3 --rw write,read --bs 1m --size 64m $IP:/export ;;
    4.1) ours v41 $ST --vers 4.1 --rw write,read --bs 1m --size 64m $IP:/ ;;
    esac
}
if [ $((r % 2)) -eq 1 ]; then seq1 3 > /tmp/bn.v3; seq1 4.1 > /tmp/bn.v41; else seq1 4.1 > /tmp/bn.v41; seq1 3 > /tmp/bn.v3; fi
cat /tmp/bn.v3 /tmp/bn.v41
# 2. 4 KiB random READ, 32 in flight; /export is the pseudo-root and a local
#    tmpfs here, so the file is made in place.
timeout 60 dd if=/dev/zero of=/export/bench41.dat bs=1M count=64 2> /dev/null || echo dd >> $F
mkdir -p $M
timeout 60 mount -t nfs -o vers=4.1,proto=rdma,port=20049 $IP:/ $M || echo mount >> $F
b0=$(busy)
timeout 120 fio --name=rr --filename=$M/bench41.dat --rw=randread --bs=4k --ioengine=libaio --direct=1 \
    --iodepth=32 --runtime="$RT" --time_based --output-format=terse > /tmp/bn.fio 2>&1 || echo fio >> $F
b1=$(busy)
timeout 60 umount $M || echo umount >> $F
awk -F';' -v busy=$((b1 - b0)) 'NF > 89 {
    usr = $88; sys = $89; sub(/%/, "", usr); sub(/%/, "", sys)
    printf "fig kernel.randread_iops %s\n", $8
    if ($8 > 0) {
        printf "fig kernel.randread_cpu_us_per_op %.1f\n", (usr + sys) / 100 * 1e6 / $8
        printf "fig kernel.randread_guest_cpu_us_per_op %.1f\n", busy * 10000 / ($8 * $9 / 1000) }
    if (usr + sys > 0) printf "fig kernel.user_share_of_cpu %.3f\n", usr / (usr + sys) }' /tmp/bn.fio > /tmp/bn.k
cat /tmp/bn.k
ours ours1 $RT --vers 4.1 --rw randread --bs 4k --iodepth 32 --file bench41.dat $IP:/ > /tmp/bn.o1
ours ours4 $RT --vers 4.1 --rw randread --bs 4k --iodepth 8 --numjobs 4 --file bench41.dat $IP:/ > /tmp/bn.o4
cat /tmp/bn.o1 /tmp/bn.o4
rm -f /export/bench41.dat
cat /tmp/bn.v3 /tmp/bn.v41 /tmp/bn.k /tmp/bn.o1 /tmp/bn.o4 | awk '
    { v[$2] = $3 }
    function ratio(name, a, b) { if (v[b] > 0) printf "ratio %s %.3f\n", name, v[a] / v[b] }
    END { ratio("v41_over_v3.read_MBps", "v41.read_MBps", "v3.read_MBps")
          ratio("v41_over_v3.write_MBps", "v41.write_MBps", "v3.write_MBps")
          ratio("ours1_over_kernel.randread_iops", "ours1.read_iops", "kernel.randread_iops")
          ratio("ours4_over_kernel.randread_iops", "ours4.read_iops", "kernel.randread_iops") }'
if [ -s $F ]; then echo "failed: $(cat $F)"; cat /tmp/bn.fio; exit 1; fi
