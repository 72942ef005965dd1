#!/bin/sh
# One round of lab/bench-verbs.sh, run in the guest from the share: on
# rxe0 (to its own address, both ends in the guest), perftest's
# ib_write_bw -R, ib_read_bw -R (1 MiB) and ib_send_lat -R (2 bytes), with
# -e (sleep on completion events; not for ib_write_bw, which refuses it)
# and without (busy polling), and the
# verbs provider's 1 MiB RDMA Write and Read and rpcrdma's NULL round trip
# in the same two modes (its event mode, and Options.BusyPoll negative:
# polling only, as perftest without -e). Prints one
# line per figure ("fig NAME VALUE") and one per ratio ("ratio NAME
# VALUE"): bandwidths as ours/perftest, NULL as our median round trip over
# twice ib_send_lat's typical (median) latency, median to median (and our
# mean over it, null_mean_*, for the record). Every step is bounded by
# timeout(1).
#
# usage: bench-verbs.sh DIR   (DIR holds verbs.test and rpcrdma.test)
B=${1:-/share}
D=rxe0
IP=10.0.3.15
export IP
# The helpers run in command substitutions (subshells): a failure is
# recorded in a file, not a variable.
F=/tmp/bv.failed
rm -f $F
# perftest: the average bandwidth (MiB/s, perftest's MB) or the typical
# latency (us) of pt.sh's client result line.
bw() { IP=$IP pt.sh "$1" $D -R -F -s 1048576 -n 100 $2 > /tmp/bv.pt 2>&1 || echo "$*" >> $F
       awk '$1 == "cli|" && $2 == 1048576 { v = $5 } END { print v + 0 }' /tmp/bv.pt; }
lat() { IP=$IP pt.sh ib_send_lat $D -R -F -n 2000 $1 > /tmp/bv.pt 2>&1 || echo "$*" >> $F
        awk '$1 == "cli|" && $2 == 2 { v = $6 } END { print v + 0 }' /tmp/bv.pt; }
# ours: MiB/s from a Go benchmark's MB/s (10^6 bytes), or us from ns/op.
gobw() { RPCRDMA_VERBS_ADDR=$IP timeout 300 "$B/verbs.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime 40x \
           -test.timeout 280s -verbs.addr $IP -verbs.device $D > /tmp/bv.go 2>&1 || echo "$*" >> $F
         awk '/^Benchmark/ { for (i = 1; i < NF; i++) if ($(i+1) == "MB/s") v = $i * 1e6 / 1048576 } END { print v + 0 }' /tmp/bv.go; }
# gonull runs the NULL benchmark into /tmp/bv.null; gous prints its mean
# (ns/op) or median (p50-ns/op) round trip in us.
gonull() { RPCRDMA_VERBS_ADDR=$IP RPCRDMA_VERBS_DEVICE=$D timeout 300 "$B/rpcrdma.test" -test.run '^$' -test.bench "^$1\$" \
             -test.benchtime 2000x -test.timeout 280s > /tmp/bv.null 2>&1 || echo "$*" >> $F; }
gous() { awk -v u="$1" '/^Benchmark/ { for (i = 1; i < NF; i++) if ($(i+1) == u) v = $i / 1000 } END { print v + 0 }' /tmp/bv.null; }
ratio() { awk -v a="$2" -v b="$3" -v n="$1" 'BEGIN { if (b > 0) printf "ratio %s %.3f\n", n, a / b; else printf "ratio %s nan\n", n }'; }

for mode in event poll; do
    if [ $mode = event ]; then e=-e; s=; else e=; s=BusyPoll; fi
    # perftest has no event mode for RDMA Write ("Events feature not
    # available on WRITE verb"): our event-mode Write is compared with
    # its polling ib_write_bw, a stricter baseline.
    pw=$(bw ib_write_bw ""); ow=$(gobw "BenchmarkWrite1MiB$s")
    pr=$(bw ib_read_bw "$e");  or=$(gobw "BenchmarkRead1MiB$s")
    pl=$(lat "$e");            gonull "BenchmarkVerbsNull$s"
    on=$(gous p50-ns/op);      om=$(gous ns/op)
    echo "fig $mode.perftest.write_MiBps $pw"; echo "fig $mode.ours.write_MiBps $ow"
    echo "fig $mode.perftest.read_MiBps $pr";  echo "fig $mode.ours.read_MiBps $or"
    echo "fig $mode.perftest.send_lat_typical_us $pl"
    echo "fig $mode.ours.null_rtt_median_us $on"; echo "fig $mode.ours.null_rtt_mean_us $om"
    ratio "$mode.write" "$ow" "$pw"
    ratio "$mode.read" "$or" "$pr"
    ratio "$mode.null_over_2x_send_lat" "$on" "$(awk -v l="$pl" 'BEGIN { print 2 * l }')"
    ratio "$mode.null_mean_over_2x_send_lat" "$om" "$(awk -v l="$pl" 'BEGIN { print 2 * l }')"
done
if [ -s $F ]; then echo "failed: $(cat $F)"; cat /tmp/bv.pt /tmp/bv.go /tmp/bv.null; exit 1; fi
