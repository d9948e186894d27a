#!/usr/bin/env bash
# Description: the kernel's iSCSI initiator on a connection shunt
# accelerated.  iscsid (under shunt) logs in to tgtd (under shunt) over the
# accelerated connection, then hands its socket to the kernel's iscsi_tcp
# by number (ISCSI_UEVENT_BIND_CONN on its NETLINK_ISCSI socket); from
# then on the kernel reads and writes the socket itself.  The connection
# must move to TCP at the exact byte before the kernel takes it (reason
# kernel-socket, 31): 8 MiB written through the session's disk with
# O_DIRECT and read back must equal what was written, and tgtd's backing
# file too.  Over shared memory (both in this guest) and over RDMA (the
# two devices).  Before the forty-sixth session the bind went through
# untouched: the kernel wrote its SCSI commands onto a socket tgtd never
# read.
set -eu
for p in tgtd tgtadm iscsid iscsiadm; do
	command -v $p > /dev/null || { echo "skip: no $p in the guest"; exit 77; }
done
modprobe iscsi_tcp 2> /dev/null && modprobe sd_mod 2> /dev/null ||
	{ echo "skip: no iscsi_tcp or sd_mod module"; exit 77; }
IQN=iqn.2026-12.org.shunt:disk
PORTAL=10.0.0.1:3260
IMG=/tmp/iscsi.img
die() {
	echo "FAIL: $*"
	for f in /tmp/tgtd.log /tmp/iscsid.log /tmp/iscsiadm.log; do echo "== $f"; tail -15 "$f" 2> /dev/null; done
	exit 1
}
mkdir -p /etc/iscsi /var/run/tgtd /run/lock/iscsi /var/lib/iscsi
echo "InitiatorName=iqn.2026-12.org.shunt:guest" > /etc/iscsi/initiatorname.iscsi
printf 'node.startup = manual\nnode.conn[0].timeo.login_timeout = 30\n' > /etc/iscsi/iscsid.conf
head -c $((8 << 20)) /dev/urandom > /tmp/iscsi.data

# stop ISCSID TGTD: log out, then both daemons (tgtd ends only once it
# serves no target)
stop() {
	iscsiadm -m node -T $IQN -p $PORTAL --logout > /dev/null 2>&1 || true
	iscsiadm -m node -T $IQN -p $PORTAL -o delete > /dev/null 2>&1 || true
	kill "$1" 2> /dev/null || true
	wait "$1" 2> /dev/null || true
	tgtadm --lld iscsi --op delete --mode target --tid 1 --force > /dev/null 2>&1 || true
	tgtadm --op delete --mode system > /dev/null 2>&1 || kill "$2" 2> /dev/null || true
	for _ in $(seq 50); do kill -0 "$2" 2> /dev/null || break; sleep 0.1; done
	kill -9 "$2" 2> /dev/null || true
	wait "$2" 2> /dev/null || true
}

# one TRANSPORT(shm|rdma)
one() {
	local mode=$1 t=() tgt isd dev="" i
	[ "$mode" = rdma ] && t=(SHUNT_TRANSPORT=rdma)
	rm -f "$IMG"; truncate -s 64M "$IMG"
	env LD_PRELOAD="$LIB" SHUNT_LOG=1 "${t[@]}" tgtd -f > /tmp/tgtd.log 2>&1 &
	tgt=$!
	for i in $(seq 200); do tgtadm --lld iscsi --op show --mode target > /dev/null 2>&1 && break; sleep 0.1; done
	tgtadm --lld iscsi --op new --mode target --tid 1 -T $IQN &&
		tgtadm --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$IMG" &&
		tgtadm --lld iscsi --op bind --mode target --tid 1 -I ALL || die "$mode: tgtadm"
	# (its own process group: iscsid ends with kill(0, SIGTERM))
	setsid env LD_PRELOAD="$LIB" SHUNT_LOG=1 "${t[@]}" iscsid -f -n > /tmp/iscsid.log 2>&1 &
	isd=$!
	for i in $(seq 100); do ss -xl | grep -q ISCSIADM_ABSTRACT && break; sleep 0.1; done
	iscsiadm -m node -o new -T $IQN -p $PORTAL > /tmp/iscsiadm.log 2>&1 || die "$mode: the node record"
	timeout 90 iscsiadm -m node -T $IQN -p $PORTAL --login >> /tmp/iscsiadm.log 2>&1 || die "$mode: login"
	for i in $(seq 200); do
		dev=$(ls /sys/class/iscsi_session/session*/device/target*/*:*:*:1/block/ 2> /dev/null | head -n 1)
		[ -n "$dev" ] && [ -b "/dev/$dev" ] && break
		sleep 0.05
	done
	[ -n "$dev" ] && [ -b "/dev/$dev" ] || die "$mode: the session's disk never came"
	timeout 120 dd if=/tmp/iscsi.data of="/dev/$dev" bs=1M oflag=direct conv=fsync 2> /tmp/iscsi.dd ||
		die "$mode: writing /dev/$dev: $(cat /tmp/iscsi.dd)"
	echo 3 > /proc/sys/vm/drop_caches
	timeout 120 dd if="/dev/$dev" of=/tmp/iscsi.back bs=1M count=8 iflag=direct 2> /tmp/iscsi.dd ||
		die "$mode: reading /dev/$dev: $(cat /tmp/iscsi.dd)"
	cmp -s /tmp/iscsi.data /tmp/iscsi.back || die "$mode: what /dev/$dev read back differs from what was written"
	grep -q "connect fd [0-9]*: accelerated ($mode)" /tmp/iscsid.log ||
		die "$mode: the login was not accelerated ($mode)"
	grep -q 'move: kernel-socket: .*connection' /tmp/iscsid.log ||
		die "$mode: no move to TCP before the kernel took the socket"
	stop "$isd" "$tgt"
	head -c $((8 << 20)) "$IMG" | cmp -s /tmp/iscsi.data - || die "$mode: tgtd's file differs"
	echo "iscsi: 8 MiB written and read back through the session's disk, intact (logged in over $mode, moved to TCP for the kernel)"
}
one shm
one rdma
