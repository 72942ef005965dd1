# Sourced by lab/bench-verbs.sh, lab/bench-getattr.sh and lab/bench-nfs41.sh,
# from the repository's top directory:
#   rounds_dir NAME
# sets D to a new directory of the lab VM's share (WORK, default
# /tmp/rpcrdma-lab), removed when the calling script exits, for the test
# binaries the script then builds there;
#   rounds SCRIPT RUNS
# copies lab/guest/SCRIPT into $D, runs it in the guest RUNS times (each
# run one guest command, bounded), and prints the median and range over
# the runs of every "fig NAME VALUE" and "ratio NAME VALUE" line it
# printed.
rounds_dir() {
    WORK=${WORK:-/tmp/rpcrdma-lab}
    D=$(mktemp -d "$(cat "$WORK/share-dir")/$1.XXXXXX")
    trap 'rm -rf "$D"' EXIT
}

rounds() {
    cp "lab/guest/$1" "$D/"
    chmod -R a+rX "$D"
    G=/share/$(basename "$D")
    OUT=$(mktemp)
    trap 'rm -rf "$D" "$OUT"' EXIT
    i=1
    while [ "$i" -le "$2" ]; do
        echo "== run $i of $2"
        lab/guestctl.py --timeout 900 "timeout 880 sh $G/$1 $G" | tee -a "$OUT"
        i=$((i + 1))
    done
    echo "== over $2 runs: median [min, max]"
    grep -E '^(ratio|fig) ' "$OUT" | sort -k2,2 -k3,3g | awk '
        { k = $1 " " $2; v[k, ++n[k]] = $3; if (!(k in seen)) { seen[k] = 1; keys[++m] = k } }
        END { for (j = 1; j <= m; j++) { k = keys[j]; c = n[k]
                med = (c % 2) ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2
                printf "%-50s %10.3f  [%.3f, %.3f]\n", k, med, v[k, 1], v[k, c] } }'
}
