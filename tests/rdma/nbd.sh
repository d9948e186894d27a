#!/usr/bin/env bash
# Description: the kernel's NBD client on a connection shunt accelerated.
# nbd-client (under shunt) negotiates with nbd-server (under shunt) over
# the accelerated connection, then hands its socket to the kernel's NBD
# driver - by generic netlink (NBD_CMD_CONNECT, its default) or by ioctl
# (NBD_SET_SOCK, -nonetlink) - and exits or waits in NBD_DO_IT; from then
# on the kernel reads and writes the socket itself.  The connection must
# move to TCP at the exact byte before the kernel takes it (reason
# kernel-socket, 31): 8 MiB written through /dev/nbd0 with O_DIRECT and
# read back must equal what was written, and the server's file too.  Over
# shared memory (both in this guest) and over RDMA (the two devices).
# Before, the driver's requests went onto a socket the server did not read
# (the server reset the connection: bytes on the socket of an accelerated
# one) and the device's I/O failed.
set -eu
command -v nbd-client > /dev/null && command -v nbd-server > /dev/null ||
	{ echo "skip: no nbd-client/nbd-server in the guest"; exit 77; }
modprobe nbd nbds_max=2 2> /dev/null || { echo "skip: no nbd module"; exit 77; }
die() { echo "FAIL: $*"; cat /tmp/nbds.log /tmp/nbdc.log 2> /dev/null | tail -20; exit 1; }
IMG=/tmp/nbd.img
head -c $((8 << 20)) /dev/urandom > /tmp/nbd.data
cat > /tmp/nbd.conf << EOF
[generic]
	user = root
	group = root
	listenaddr = 10.0.0.1
	port = 10809
[disk]
	exportname = $IMG
EOF

# one NAME TRANSPORT(shm|rdma) [nbd-client flags]
one() {
	local name=$1 mode=$2 t=() srv i
	shift 2
	[ "$mode" = rdma ] && t=(SHUNT_TRANSPORT=rdma)
	rm -f "$IMG"; truncate -s 64M "$IMG"
	: > /tmp/nbds.log
	env LD_PRELOAD="$LIB" SHUNT_LOG=1 "${t[@]}" nbd-server -C /tmp/nbd.conf -d > /tmp/nbds.log 2>&1 &
	srv=$!
	# listening is not ready: under emulation nbd-server computes for
	# seconds after listen() before its first select(), and a client
	# that waits that long for its accept goes plain (handshake-failed)
	for _ in $(seq 1200); do grep -q select "/proc/$srv/wchan" 2> /dev/null && break; sleep 0.05; done
	grep -q select "/proc/$srv/wchan" || die "$name: nbd-server never waited for a client"
	env LD_PRELOAD="$LIB" SHUNT_LOG=1 "${t[@]}" timeout 60 nbd-client 10.0.0.1 10809 /dev/nbd0 \
		-N disk -b 4096 "$@" > /tmp/nbdc.log 2>&1 || die "$name: nbd-client failed"
	for i in $(seq 200); do [ "$(cat /sys/block/nbd0/size)" != 0 ] && break; sleep 0.05; done
	[ "$(cat /sys/block/nbd0/size)" != 0 ] || die "$name: /dev/nbd0 never got its size"
	timeout 120 dd if=/tmp/nbd.data of=/dev/nbd0 bs=1M oflag=direct conv=fsync 2> /tmp/nbd.dd ||
		die "$name: writing /dev/nbd0: $(cat /tmp/nbd.dd)"
	echo 3 > /proc/sys/vm/drop_caches
	timeout 120 dd if=/dev/nbd0 of=/tmp/nbd.back bs=1M count=8 iflag=direct 2> /tmp/nbd.dd ||
		die "$name: reading /dev/nbd0: $(cat /tmp/nbd.dd)"
	cmp -s /tmp/nbd.data /tmp/nbd.back || die "$name: what /dev/nbd0 read back differs from what was written"
	head -c $((8 << 20)) "$IMG" | cmp -s /tmp/nbd.data - || die "$name: the server's file differs"
	grep -q "connect fd [0-9]*: accelerated ($mode)" /tmp/nbdc.log ||
		die "$name: the negotiation was not accelerated ($mode)"
	grep -q 'move: kernel-socket: .*connection' /tmp/nbdc.log ||
		die "$name: no move to TCP before the kernel took the socket"
	nbd-client -d /dev/nbd0 > /dev/null 2>&1 || true
	for i in $(seq 100); do kill -0 "$srv" 2> /dev/null || break; sleep 0.05; done
	kill "$srv" 2> /dev/null || true
	wait "$srv" 2> /dev/null || true
	for i in $(seq 100); do [ "$(cat /sys/block/nbd0/size)" = 0 ] && break; sleep 0.05; done
	echo "nbd: $name: 8 MiB written and read back through /dev/nbd0, intact (negotiated over $mode, moved to TCP for the kernel)"
}
one "netlink, shared memory" shm
one "ioctl, shared memory" shm -nonetlink
one "netlink, RDMA" rdma
one "ioctl, RDMA" rdma -nonetlink
