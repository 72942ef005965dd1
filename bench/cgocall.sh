#!/bin/sh
# Counts the instructions one cgo call costs, Go to C and back: a program
# built here calls a C function that adds two ints N1 and then N2 times
# under cachegrind, and the difference, divided by N2-N1, is one call
# with its share of the loop (about 12 instructions). Everything is
# counted, the runtime's entersyscall/exitsyscall included: that is what
# each of the verbs provider's calls into rdma-core pays before rdma-core
# does any work (docs/performance.md, "The verbs path in instructions").
#
#   bench/cgocall.sh        instructions per cgo call
#   bench/cgocall.sh -v     and the functions they are spent in
#
# Needs valgrind and a C compiler. Takes a few seconds.
set -eu
N1=${N1:-100000}
N2=${N2:-200000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/main.go" <<'EOF'
package main

// static int add(int a, int b) { return a + b; }
import "C"

import (
	"os"
	"strconv"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	s := C.int(0)
	for range n {
		s = C.add(s, 1)
	}
	if int(s) != n {
		panic("wrong sum")
	}
}
EOF
(cd "$tmp" && go mod init cgocall >/dev/null 2>&1 && CGO_ENABLED=1 go build -o cgocall .)
for n in "$N1" "$N2"; do
	GODEBUG=asyncpreemptoff=1 valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file="$tmp/cg.$n" "$tmp/cgocall" "$n" >"$tmp/out.$n" 2>&1
done
cg_diff "$tmp/cg.$N1" "$tmp/cg.$N2" >"$tmp/cg.diff"
cg_annotate --threshold=0 "$tmp/cg.diff" | awk -v calls=$((N2 - N1)) -v verbose="${1:-}" '
	/PROGRAM TOTALS/ { n = $1; gsub(",", "", n); total = n / calls }
	verbose == "-v" && $0 ~ /^ *-?[0-9,]+ \(/ && $NF ~ /:/ && $NF !~ /TOTALS/ {
		n = $1; gsub(",", "", n)
		if (n / calls >= 0.5)
			printf "%8.1f  %s\n", n / calls, $NF
	}
	END { printf "%.0f instructions per cgo call\n", total }'
