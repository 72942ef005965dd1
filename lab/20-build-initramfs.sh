#!/bin/bash
# Build the guest: the Debian kernel (from the downloaded linux-image .deb)
# and a busybox initramfs holding kmod, iproute2 (ip, ss, rdma), rpcbind,
# nfs-utils, rdma-core (libraries, provider plug-ins, tools), perftest, fio,
# the kernel modules the lab needs and the out-of-tree siw.ko.
#
# Usage: lab/20-build-initramfs.sh   (after 00-deps.sh and 10-build-siw.sh)
# Output: $WORK/vmlinuz, $WORK/initramfs.cpio.gz
set -euo pipefail
WORK=${WORK:-/tmp/rpcrdma-lab}
KVER=${KVER:-$(cat "$WORK/kver" 2>/dev/null || true)}
[ -n "$KVER" ] || { echo "20-build-initramfs: run 00-deps.sh first (it records the kernel ABI in $WORK/kver)" >&2; exit 1; }
[ -f "$WORK/siw/siw-nodebug.ko" ] || { echo "20-build-initramfs: run 10-build-siw.sh first" >&2; exit 1; }
LAB=$(cd "$(dirname "$0")" && pwd)
cd "$WORK"

# 1. Unpack the downloaded packages into a staging tree.
rm -rf stage rootfs
mkdir stage rootfs
for d in debs/*.deb; do dpkg -x "$d" stage; done
cp "stage/boot/vmlinuz-$KVER" vmlinuz
STLIB="$WORK/stage/lib/x86_64-linux-gnu:$WORK/stage/usr/lib/x86_64-linux-gnu"

# 2. Skeleton, busybox, our scripts.
R=$WORK/rootfs
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,run,tmp,var/lib/nfs,share,lib64}
mkdir -p "$R/lib/x86_64-linux-gnu"
cp /bin/busybox "$R/bin/busybox"
for applet in $("$R/bin/busybox" --list); do
    [ -e "$R/bin/$applet" ] || ln -s busybox "$R/bin/$applet"
done
install -m 755 "$LAB/guest/init" "$R/init"
install -m 755 "$LAB/guest/pt.sh" "$R/bin/pt.sh"

# 3. Binaries and the shared libraries they link (ldd against the staging
#    tree first, then the host: both are bookworm).
copylibs() {
    LD_LIBRARY_PATH=$STLIB ldd "$1" | awk '/=>/ {print $3}' |
    while read -r lib; do
        if [ -n "$lib" ]; then cp -nL "$lib" "$R/lib/x86_64-linux-gnu/"; fi
    done
}
BINS="bin/kmod bin/ip bin/ss usr/bin/rdma sbin/rpcbind usr/bin/rpcinfo
      usr/sbin/rpc.nfsd usr/sbin/rpc.mountd usr/sbin/exportfs
      sbin/mount.nfs sbin/showmount usr/sbin/rpcdebug usr/sbin/nfsstat
      usr/bin/ibv_devices usr/bin/ibv_devinfo usr/bin/ibv_rc_pingpong
      usr/bin/ibv_asyncwatch usr/bin/rping usr/bin/ucmatose
      usr/bin/rdma_client usr/bin/rdma_server
      usr/bin/ib_send_lat usr/bin/ib_send_bw usr/bin/ib_write_lat
      usr/bin/ib_write_bw usr/bin/ib_read_lat usr/bin/ib_read_bw"
for b in $BINS; do
    rm -f "$R/bin/$(basename "$b")"          # drop a busybox applet of that name
    mkdir -p "$R/$(dirname "$b")"
    cp "stage/$b" "$R/$b"
    copylibs "stage/$b"
done
# fio comes from the host (00-deps.sh installs Debian's package there): the
# kernel NFS client's side of bench-nfs41.sh. Its libraries (rbd, gluster,
# nbd, pmem engines) add about 84 MB to the guest's RAM.
cp /usr/bin/fio "$R/usr/bin/fio"
copylibs /usr/bin/fio
cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
# libibverbs dlopen()s its providers, so ldd lists none of them: it reads
# /etc/libibverbs.d/<name>.driver ("driver rxe") and loads
# /usr/lib/x86_64-linux-gnu/libibverbs/lib<name>-rdmav34.so. Without both,
# the device list is empty.
mkdir -p "$R/usr/lib/x86_64-linux-gnu/libibverbs" "$R/etc/libibverbs.d"
for p in rxe siw; do
    so=usr/lib/x86_64-linux-gnu/libibverbs/lib$p-rdmav34.so
    cp "stage/$so" "$R/$so"
    cp "stage/etc/libibverbs.d/$p.driver" "$R/etc/libibverbs.d/"
    copylibs "stage/$so"
done
# glibc dlopen()s libgcc_s.so.1 for pthread_exit and pthread_cancel; ldd does
# not list it, and rping aborts at disconnect without it.
cp -L stage/lib/x86_64-linux-gnu/libgcc_s.so.1 "$R/lib/x86_64-linux-gnu/"
for t in modprobe insmod rmmod lsmod depmod modinfo; do
    rm -f "$R/sbin/$t" "$R/bin/$t"; ln -s ../bin/kmod "$R/sbin/$t"
done
ln -sf mount.nfs "$R/sbin/mount.nfs4"
ln -sf ../bin/rpcinfo "$R/usr/sbin/rpcinfo"

# 4. /etc
cp stage/etc/netconfig stage/etc/services stage/etc/protocols stage/etc/rpc "$R/etc/"
cat > "$R/etc/passwd" <<'X'
root:x:0:0:root:/root:/bin/sh
_rpc:x:100:65534::/run/rpcbind:/bin/false
statd:x:101:65534::/var/lib/nfs:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
X
cat > "$R/etc/group" <<'X'
root:x:0:
nogroup:x:65534:
X
echo "127.0.0.1 localhost guest" > "$R/etc/hosts"
echo "hosts: files" > "$R/etc/nsswitch.conf"
# Each export is its own tmpfs (guest/init mounts them); fsid= because a
# tmpfs has no UUID. /export is also the NFSv4 pseudo-root (fsid=0).
cat > "$R/etc/exports" <<'X'
/export    *(rw,no_root_squash,insecure,no_subtree_check,fsid=0)
/export-ro *(ro,insecure,no_subtree_check,fsid=1)
X
touch "$R/etc/fstab"

# 5. Kernel modules: the closure, from modules.dep, of what the lab loads.
M=stage/lib/modules/$KVER
RM=$R/lib/modules/$KVER
mkdir -p "$RM/updates"
ln -sf "$WORK/stage/bin/kmod" "$WORK/depmod"
LD_LIBRARY_PATH=$STLIB "$WORK/depmod" -b "$WORK/stage" "$KVER"   # the .deb has no modules.dep
cp "$WORK/siw/siw-nodebug.ko" "$RM/updates/siw.ko"
# rdma_rxe computes its ICRC with the kernel's crc32: without crc32_generic
# (or crc32_pclmul) "rdma link add ... type rxe" fails with ENOENT.
python3 - "$M" "$RM" <<'X'
import os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
dep = {}
for line in open(os.path.join(src, "modules.dep")):
    k, v = line.split(":", 1)
    dep[k] = v.split()
byname = {os.path.basename(k)[:-3].replace("-", "_"): k for k in dep}
roots = """virtio_pci virtio_net ib_core iw_cm ib_cm rdma_cm ib_uverbs rdma_ucm
crc32c_generic crc32c_intel libcrc32c rpcrdma nfsd nfs nfsv3 nfsv4
sunrpc auth_rpcgss lockd grace nfs_acl exportfs
rdma_rxe udp_tunnel ip6_udp_tunnel crc32_generic crc32_pclmul
9p 9pnet 9pnet_virtio""".split()
want = set()
def add(k):
    if k in want:
        return
    want.add(k)
    for d in dep[k]:
        add(d)
for r in roots:
    if r in byname:
        add(byname[r])   # otherwise built into the kernel
for k in sorted(want):
    os.makedirs(os.path.join(dst, os.path.dirname(k)), exist_ok=True)
    shutil.copy2(os.path.join(src, k), os.path.join(dst, k))
for f in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
    if os.path.exists(os.path.join(src, f)):
        shutil.copy2(os.path.join(src, f), os.path.join(dst, f))
print("modules copied:", len(want))
X
LD_LIBRARY_PATH=$STLIB "$WORK/depmod" -b "$R" "$KVER"

# 6. Pack.
(cd "$R" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -1 > initramfs.cpio.gz
du -sh "$R"
ls -l initramfs.cpio.gz vmlinuz
