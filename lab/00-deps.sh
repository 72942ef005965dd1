#!/bin/bash
# Install the host packages the lab needs, and download (not install) the
# Debian packages that go into the guest image.
#
# Usage: lab/00-deps.sh         (root, or sudo; a Debian 12 "bookworm" host)
#
# The kernel ABI is not pinned: old ABIs leave the archive when a new one
# arrives, so this takes the one linux-image-amd64 depends on today and
# records it in $WORK/kver for the later steps. KVER=... overrides it.
set -euo pipefail
WORK=${WORK:-/tmp/rpcrdma-lab}
mkdir -p "$WORK/debs"

export DEBIAN_FRONTEND=noninteractive
APT="apt-get -o DPkg::Lock::Timeout=900 -q"
$APT update
KVER=${KVER:-$(apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: linux-image-\(.*\)$/\1/p' | head -n1)}
[ -n "$KVER" ] || { echo "00-deps: cannot resolve the Debian kernel ABI (set KVER=)" >&2; exit 1; }
echo "$KVER" > "$WORK/kver"
echo "kernel: $KVER"

# Host: qemu; the kernel headers and source to build siw.ko; busybox and
# cpio for the initramfs; socat for qemu's guestfwd; python3 for guestctl.py
# and the module closure; libibverbs-dev and libc6-dev so that a cgo test
# binary (go test -c -tags verbs) can be built on the host and run in the
# guest; fio, which 20-build-initramfs.sh copies into the guest with the
# libraries it links (bench-nfs41.sh runs it against the guest kernel's
# NFS client).
$APT install -y --no-install-recommends \
    qemu-system-x86 "linux-headers-$KVER" linux-source-6.1 \
    busybox-static cpio xz-utils gzip socat python3 make gcc libc6-dev \
    libibverbs-dev fio

# Guest: unpacked with dpkg -x by 20-build-initramfs.sh, never installed on
# the host. The kernel, the NFS server and its libraries, then rdma-core:
# libibverbs and librdmacm, the provider plug-ins libibverbs dlopen()s
# (ibverbs-providers), ibverbs-utils, rdmacm-utils and perftest, and
# libgcc-s1, which glibc dlopen()s for pthread_exit.
cd "$WORK/debs"
chown _apt: . 2>/dev/null || true
rm -f ./*.deb
$APT download "linux-image-$KVER" \
    nfs-kernel-server nfs-common rpcbind kmod iproute2 netbase \
    libtirpc3 libtirpc-common libwrap0 libevent-core-2.1-7 libsqlite3-0 \
    libblkid1 libuuid1 libcap2 libcom-err2 libdevmapper1.02.1 \
    libgssapi-krb5-2 libkeyutils1 libkrb5-3 libk5crypto3 libkrb5support0 \
    libmount1 libnfsidmap1 libsystemd0 liblzma5 libssl3 libzstd1 libkmod2 \
    libbpf1 libbsd0 libmd0 libdb5.3 libelf1 libmnl0 libselinux1 \
    libpcre2-8-0 libxtables12 libc6 libgcrypt20 libgpg-error0 liblz4-1 \
    libudev1 zlib1g keyutils \
    libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils rdmacm-utils \
    perftest libnl-3-200 libnl-route-3-200 libibumad3 libpci3 libgcc-s1
echo "guest packages: $(ls -1 ./*.deb | wc -l)"
