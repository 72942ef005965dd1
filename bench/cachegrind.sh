#!/bin/sh
# Counts the instructions of user code a NULL round trip executes, both
# ends together, in BenchmarkPaths/NULL/rdma (RPC-over-RDMA over the
# software iWARP, in one process): the benchmark runs under cachegrind
# for N1 and for N2 calls, and the difference, divided by N2-N1, is what
# a call costs, start-up excluded. The Go scheduler's own work (runtime
# functions other than channels, maps, memmove and the network poller)
# is left out: under valgrind its threads spin, and what they count
# there says nothing about a round trip. The count is deterministic to a
# few instructions, where timings on a shared machine are not.
#
#   bench/cachegrind.sh            total per round trip
#   bench/cachegrind.sh -v         and the 40 costliest functions, then
#                                  the count by layer (the directory of each
#                                  function's file: rpc, rpcrdma,
#                                  rpcrdma/wire, xdr, the provider's, Go's
#                                  packages; _test.go files are the
#                                  benchmark's own)
#   TRANSPORT=tcp bench/cachegrind.sh   ONC RPC over loopback TCP instead
#                                  (BenchmarkPaths/NULL/tcp; user code only,
#                                  the kernel's share is not counted)
#   TRANSPORT=loopback bench/cachegrind.sh   RPC-over-RDMA over the
#                                  in-process provider (BenchmarkPaths/
#                                  NULL/loopback): no framing and no
#                                  socket, the stand-in for an RNIC's
#                                  verbs path (docs/performance.md, "The
#                                  verbs path in instructions")
#
# Needs valgrind (apt-get install valgrind). Takes about a minute.
set -eu
cd "$(dirname "$0")/.."
N1=${N1:-2000}
N2=${N2:-4000}
TRANSPORT=${TRANSPORT:-rdma}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/rpcrdma.test" ./rpcrdma
for n in "$N1" "$N2"; do
	GODEBUG=asyncpreemptoff=1 valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file="$tmp/cg.$n" "$tmp/rpcrdma.test" \
		-test.run '^$' -test.bench "Paths/^NULL\$/$TRANSPORT\$" -test.benchtime "${n}x" >"$tmp/out.$n" 2>&1 || true
	if ! grep -Eq "^BenchmarkPaths/NULL/$TRANSPORT(-[0-9]+)?[[:space:]]+$n[[:space:]]" "$tmp/out.$n"; then
		echo "cachegrind.sh: the benchmark did not run $n calls under valgrind:" >&2
		cat "$tmp/out.$n" >&2
		exit 1
	fi
done
cg_diff "$tmp/cg.$N1" "$tmp/cg.$N2" >"$tmp/cg.diff"
cg_annotate --threshold=0 "$tmp/cg.diff" | awk -v calls=$((N2 - N1)) -v verbose="${1:-}" -v root="$PWD/" '
	# Function lines: "  1,234 ( 0.01%)  /path/file.go:pkg.Func"
	$0 ~ /^ *-?[0-9,]+ \(/ && $NF ~ /\.(go|s):/ {
		n = $1; gsub(",", "", n)
		split($NF, f, ":")
		file = f[1]
		if (file ~ /\/runtime\// && file !~ /(chan|select|sema)\.go$|\/maps\/|memmove/ && $NF !~ /netpoll\.go:internal\/poll\./)
			next
		per = n / calls
		total += per
		if (verbose == "-v") {
			printf "%8.0f  %s\n", per, $NF | "sort -rn | head -40"
			layer = file
			sub(/\/[^\/]*$/, "", layer)
			if (file ~ /_test\.go$/)
				layer = "the benchmark (_test.go)"
			else if (index(file, root) == 1)
				layer = substr(layer, length(root) + 1)
			else if (layer ~ /\/src\//)
				layer = "go: " substr(layer, index(layer, "/src/") + 5)
			bylayer[layer] += per
		}
	}
	END {
		close("sort -rn | head -40")
		if (verbose == "-v") {
			print "by layer:"
			for (l in bylayer)
				if (bylayer[l] >= 0.5)
					printf "%8.0f  %s\n", bylayer[l], l | "sort -rn"
			close("sort -rn")
		}
		printf "%.0f instructions of user code per NULL round trip\n", total
	}'
