#!/bin/bash
# Build the soft-iWARP driver (siw.ko) out of tree: Debian's kernel ships
# without CONFIG_RDMA_SIW. Skipped when $WORK/siw holds a module built for
# the same kernel ABI (FORCE=1 rebuilds).
#
# Usage: lab/10-build-siw.sh    (after 00-deps.sh)
set -euo pipefail
WORK=${WORK:-/tmp/rpcrdma-lab}
KVER=${KVER:-$(cat "$WORK/kver" 2>/dev/null || true)}
[ -n "$KVER" ] || { echo "10-build-siw: run 00-deps.sh first (it records the kernel ABI in $WORK/kver)" >&2; exit 1; }
SRC=/usr/src/linux-source-6.1.tar.xz
cd "$WORK"
if [ "${FORCE:-0}" != 1 ] && [ -f siw/siw-nodebug.ko ] &&
    [ "$(cat siw/built-for 2>/dev/null)" = "$KVER" ]; then
    echo "siw.ko for $KVER already built (FORCE=1 rebuilds)"
    exit 0
fi
rm -rf siw-src siw
mkdir siw-src
tar -C siw-src -xJf "$SRC" linux-source-6.1/drivers/infiniband/sw/siw
mv siw-src/linux-source-6.1/drivers/infiniband/sw/siw siw
rm -rf siw-src
make -C "/usr/src/linux-headers-$KVER" M="$WORK/siw" CONFIG_RDMA_SIW=m modules
strip --strip-debug siw/siw.ko -o siw/siw-nodebug.ko   # 5.3 MB -> 0.3 MB
echo "$KVER" > siw/built-for
ls -l siw/siw.ko siw/siw-nodebug.ko
