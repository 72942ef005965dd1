#!/bin/bash
# Boot the lab guest in the background and wait (bounded) until it prints
# LAB-READY, i.e. knfsd listens.
#
# Usage: lab/30-boot-vm.sh      (after 20-build-initramfs.sh; needs no root)
#
# Network: qemu user networking with restrict=on (the guest reaches nothing
# outside), and forwards on the host's loopback only:
#   127.0.0.1:$RDMA_HOSTPORT (20049)    -> guest 20049  knfsd NFS/RDMA (siw: iWARP is TCP)
#   127.0.0.1:$NFS_HOSTPORT (12049)     -> guest 2049   knfsd NFS/TCP
#   127.0.0.1:$MOUNTD_HOSTPORT (12048)  -> guest 20048  rpc.mountd over TCP
#   127.0.0.1:$RPCBIND_HOSTPORT (12111) -> guest 111    rpcbind over TCP
#   guest 10.0.2.100:20049 -> 127.0.0.1:$PEER_PORT (30049)       a responder on the host
#   guest 10.0.2.100:20048 -> 127.0.0.1:$PEER_MOUNT_PORT (30048) MOUNT on the host
#   guest 10.0.2.100:2049  -> 127.0.0.1:$PEER_NFS_PORT (32049)   NFS/TCP on the host
# The guestfwd programs are socat with its log sent to /dev/null: their
# stderr would be the guest's TCP stream, and siw oopses on text it takes
# for an MPA Reply.
# A second NIC (eth1, 10.0.3.0/24, no forwards) carries rxe0.
# $SHARE (default $WORK/share, created here) is shared read-only over
# virtio-9p; the guest mounts it on /share.
# Consoles: ttyS0 -> $WORK/console.log, ttyS1 -> $WORK/ctl.sock (command
# channel, see guestctl.py), QEMU monitor -> $WORK/mon.sock.
set -euo pipefail
WORK=${WORK:-/tmp/rpcrdma-lab}
RDMA_HOSTPORT=${RDMA_HOSTPORT:-20049}
NFS_HOSTPORT=${NFS_HOSTPORT:-12049}
MOUNTD_HOSTPORT=${MOUNTD_HOSTPORT:-12048}
RPCBIND_HOSTPORT=${RPCBIND_HOSTPORT:-12111}
PEER_PORT=${PEER_PORT:-30049}
PEER_MOUNT_PORT=${PEER_MOUNT_PORT:-30048}
PEER_NFS_PORT=${PEER_NFS_PORT:-32049}
SHARE=${SHARE:-$WORK/share}
ACCEL=${ACCEL:-tcg}          # KVM may not work under nested virtualisation (README)
SMP=${SMP:-2}
MEM=${MEM:-1024}
BOOT_TIMEOUT=${BOOT_TIMEOUT:-300}   # seconds to LAB-READY
KERNEL_ARGS=${KERNEL_ARGS:-}        # appended to the guest kernel's command line (README)
cd "$WORK"
[ -f vmlinuz ] && [ -f initramfs.cpio.gz ] || { echo "30-boot-vm: run 20-build-initramfs.sh first" >&2; exit 1; }
if [ -f qemu.pid ] && kill -0 "$(cat qemu.pid)" 2>/dev/null; then
    echo "VM already running (pid $(cat qemu.pid))"; exit 0
fi
rm -f console.log ctl.sock mon.sock qemu.pid share-dir
mkdir -p "$SHARE"
SHARE=$(cd "$SHARE" && pwd)
if [ "$ACCEL" = kvm ]; then
    ACCEL_OPTS="-accel kvm -cpu host"
else
    ACCEL_OPTS="-accel tcg,thread=multi -cpu max"
fi
fwd() { echo "guestfwd=tcp:10.0.2.100:$1-cmd:socat -lf /dev/null STDIO TCP4:127.0.0.1:$2"; }
NET="user,id=n0,restrict=on"
NET+=",hostfwd=tcp:127.0.0.1:${RDMA_HOSTPORT}-:20049"
NET+=",hostfwd=tcp:127.0.0.1:${NFS_HOSTPORT}-:2049"
NET+=",hostfwd=tcp:127.0.0.1:${MOUNTD_HOSTPORT}-:20048"
NET+=",hostfwd=tcp:127.0.0.1:${RPCBIND_HOSTPORT}-:111"
NET+=",$(fwd 20049 "$PEER_PORT"),$(fwd 20048 "$PEER_MOUNT_PORT"),$(fwd 2049 "$PEER_NFS_PORT")"
start=$(date +%s.%N)
qemu-system-x86_64 $ACCEL_OPTS -machine q35 -smp "$SMP" -m "$MEM" \
    -display none -nodefaults -no-reboot \
    -kernel vmlinuz -initrd initramfs.cpio.gz \
    -append "console=ttyS0 panic=-1 net.ifnames=0${KERNEL_ARGS:+ $KERNEL_ARGS}" \
    -netdev "$NET" -device virtio-net-pci,netdev=n0 \
    -netdev user,id=n1,restrict=on,net=10.0.3.0/24 -device virtio-net-pci,netdev=n1 \
    -virtfs "local,path=$SHARE,mount_tag=share,security_model=none,readonly=on,id=share0" \
    -serial file:console.log \
    -serial unix:ctl.sock,server=on,wait=off \
    -monitor unix:mon.sock,server=on,wait=off \
    -pidfile qemu.pid -daemonize
echo "$SHARE" > share-dir   # read by internal/lab.Share
touch ctl.lock && chmod 666 ctl.lock 2>/dev/null || true   # guestctl.py, internal/lab.Run
deadline=$(( $(date +%s) + BOOT_TIMEOUT ))
until grep -q LAB-READY console.log 2>/dev/null; do
    if ! kill -0 "$(cat qemu.pid 2>/dev/null)" 2>/dev/null; then
        echo "30-boot-vm: qemu exited" >&2; tail -30 console.log >&2; exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "30-boot-vm: no LAB-READY after ${BOOT_TIMEOUT}s; stopping the VM" >&2
        tail -30 console.log >&2
        kill "$(cat qemu.pid)" 2>/dev/null || true
        exit 1
    fi
    sleep 0.5
done
end=$(date +%s.%N)
grep -E 'lab-init' console.log
awk "BEGIN { printf \"boot to LAB-READY: %.1fs wall\\n\", $end - $start }"
