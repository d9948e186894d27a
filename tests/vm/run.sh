#!/usr/bin/env bash
# tests/vm/run.sh - run a command inside a throw-away QEMU guest with two
# Soft-RoCE (rdma_rxe) devices, the shunt tree shared in, and return its
# output and exit code.  This machine's kernel has no RDMA; Debian's own
# kernel booted under QEMU (software emulation, no KVM needed) has rdma_rxe,
# so the RDMA transport runs real libibverbs code against real kernel verbs.
#
#   tests/vm/run.sh [-t SECS] [-k KVER] [-K ROOT] [-m MEM] [-r] [-v] [-n] [-H A|B:PORT] -- COMMAND...
#
# COMMAND runs as root in the shared tree (this repository, read-write at
# the same path as on the host, so build/ and scripts work unchanged).
# Exit codes: COMMAND's; 124 time-out; 125 the guest could not be set up;
# 77 QEMU or a guest kernel is missing (tests treat it as "skip").
#
# The guest when COMMAND starts (RXE_* exported):
#   veth0 10.0.0.1/24 <-> veth1 10.0.0.2/24 in one network namespace (this
#   rxe listens only there), with policy routes so that traffic between the
#   two addresses crosses the veth pair: tc, iptables and tcpdump on veth0/1
#   see every RoCEv2 packet (UDP 4791), which is where faults go in.
#   rxe0 on veth0, rxe1 on veth1.  RLIMIT_MEMLOCK unlimited.
# -n: no rxe devices (plain guest).  -r: rebuild the cached image.
# -H A:PORT / -H B:PORT: one of two hosts joined by a QEMU UDP socket netdev
# (A on 127.0.0.1:PORT, B on PORT+1; tests/vm/pair.sh runs both): eth0 is
# 10.1.0.1 (A) or 10.1.0.2 (B) with rxe0 on it, instead of the veth pair.
# UDP, not the socket netdev's TCP stream: over TCP, Nagle and delayed ACKs
# between the two QEMU processes held small frames back ~40 ms each.
# -K ROOT: the kernel and modules come from ROOT/boot and ROOT/lib/modules
# (a kernel package unpacked there, not installed: scripts/guest-kernel.sh
# unpacks Debian 12's 6.12 and prints its ROOT; bench/smc.sh); the
# environment's SHUNT_VM_KROOT=ROOT does the same for every guest.
# -v: stream the guest console to stderr (VM_LOGLEVEL=7: all kernel
# messages, stack traces of a soft lockup among them).  Cache: $SHUNT_VM_CACHE
# (default /var/tmp/shunt-vm).
#
# Needs (scripts/deps.sh): qemu-system-x86 linux-image-amd64
# busybox-static kmod cpio rdma-core ibverbs-providers ibverbs-utils
# rdmacm-utils perftest xz-utils zstd.
set -euo pipefail
SELF=$(readlink -f "$0")
TREE=$(cd "$(dirname "$SELF")/../.." && pwd)
CACHE=${SHUNT_VM_CACHE:-/var/tmp/shunt-vm}
LIBDIR=/usr/lib/x86_64-linux-gnu
TIMEOUT=900 KVER= MEM=2G REBUILD=0 VERBOSE=0 RXE=1 HOST= KR=
while getopts "t:k:K:m:rvnH:" o; do
	case $o in
	t) TIMEOUT=$OPTARG ;; k) KVER=$OPTARG ;; K) KR=$(readlink -f "$OPTARG") ;;
	m) MEM=$OPTARG ;; H) HOST=$OPTARG ;;
	r) REBUILD=1 ;; v) VERBOSE=1 ;; n) RXE=0 ;;
	*) sed -n '2,/^set -euo/p' "$SELF" | sed '$d'; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: tests/vm/run.sh [-t SECS] [-k KVER] [-n] -- COMMAND..." >&2; exit 2; }
say() { echo "vm: $*" >&2; }
skip() { say "skip: $*"; exit 77; }

command -v qemu-system-x86_64 > /dev/null || skip "qemu-system-x86_64 missing (scripts/deps.sh)"
# The kernel: -K, else $SHUNT_VM_KROOT (a ROOT as -K's: the integration
# scripts pass the environment on), else this machine's /boot.
if [ -z "$KR" ] && [ -z "$KVER" ] && [ -n "${SHUNT_VM_KROOT:-}" ]; then
	KR=$(readlink -f "$SHUNT_VM_KROOT"); [ "$KR" = / ] && KR=
fi
# the newest installed kernel that has Soft-RoCE (a cloud flavour may not)
[ -n "$KVER" ] || KVER=$(ls "$KR"/boot/vmlinuz-* 2> /dev/null | sed "s|$KR/boot/vmlinuz-||" | sort -V |
	while read -r k; do ls "$KR"/lib/modules/"$k"/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko* > /dev/null 2>&1 &&
		echo "$k"; done | tail -n1)
[ -n "$KVER" ] && [ -r "$KR/boot/vmlinuz-$KVER" ] && [ -d "$KR/lib/modules/$KVER" ] ||
	skip "no guest kernel in /boot (apt-get install linux-image-amd64)"
for t in cpio busybox kmod ldd; do command -v $t > /dev/null || skip "missing $t"; done
mkdir -p "$CACHE"

# ---- the guest image: host programs + their libraries + kernel modules ----
MODULES="rdma_rxe ib_uverbs rdma_ucm ib_umad veth smc smc_diag crc32_generic crc32c_generic
	9p 9pnet_virtio virtio_pci virtio_console virtio_net sch_netem sch_ingress cls_u32 cls_bpf
	act_gact ip_tables iptable_filter iptable_mangle xt_statistic xt_u32 xt_tcpudp
	nf_tables nft_compat tls gcm ghash_generic ctr seqiv nbd scsi_transport_iscsi iscsi_tcp sd_mod"
PROGS="bash kmod ip tc rdma ss tcpdump xtables-legacy-multi nft timeout setsid stdbuf
	setpriv pkill pgrep ibv_devices ibv_devinfo ibv_rc_pingpong rping cmtime rstream ib_write_lat ib_write_bw
	redis-server redis-benchmark redis-cli iperf3 socat gnuplot strace nbd-client nbd-server
	tgtd tgtadm iscsid iscsiadm"
EXTRA="/etc/libibverbs.d $LIBDIR/libibverbs $LIBDIR/rsocket /etc/protocols /etc/services
	$LIBDIR/libgcc_s.so.1 $LIBDIR/xtables /usr/libexec/coreutils/libstdbuf.so"

put() { # put ROOT PATH: PATH (symlinks followed) and, for ELF files, its libraries
	local root=$1 p=$2 l
	[ -e "$p" ] || return 0
	if [ -d "$p" ]; then
		mkdir -p "$root$p"; cp -rL "$p/." "$root$p/"
		find "$p" -name '*.so*' -type f | while read -r l; do libs "$root" "$l"; done
		return 0
	fi
	mkdir -p "$root$(dirname "$p")"
	[ -e "$root$p" ] || cp -L "$p" "$root$p"
	libs "$root" "$p"
}
libs() {
	local root=$1 f=$2 l
	head -c4 "$f" 2> /dev/null | grep -q ELF || return 0
	{ ldd "$f" 2> /dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
		while read -r l; do
			# canonical paths: an overlay must never turn the image's
			# merged-/usr links (lib -> usr/lib) into directories
			l=$(readlink -f "$(dirname "$l")")/$(basename "$l")
			[ -e "$root$l" ] || { mkdir -p "$root$(dirname "$l")"; cp -L "$l" "$root$l"; }
		done
}

write_init() {
	cat > "$1/init" << 'EOF'
#!/bin/bash
# PID 1 of shunt's RDMA test guest.
export PATH=/usr/sbin:/usr/bin HOME=/root LANG=C
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /tmp /run /root
mount -t devpts devpts /dev/pts; mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
ln -sf /proc/self/fd /dev/fd
. /etc/shunt-vm.conf
OUT=/dev/ttyS1 RC=/dev/ttyS2
if modprobe virtio_pci && modprobe virtio_console; then
	for _ in $(seq 50); do ls /dev/vport*p2 > /dev/null 2>&1 && break; sleep 0.1; done
	p=$(ls /dev/vport*p1 2>/dev/null | head -n1)
	[ -n "$p" ] && OUT=$p RC=${p%1}2
fi
ip link set lo up
ulimit -l unlimited
done_() { echo "$1" > $RC; sync; poweroff -f; }
fail() { echo "vm setup failed: $*" > $OUT; done_ 125; }
modprobe 9pnet_virtio && modprobe 9p || fail "9p"
# kernel TLS (tests/behave/ktls), where the kernel has it, and its cipher
for m in tls gcm ghash_generic ctr seqiv; do modprobe -q $m; done
# the iSCSI initiator's netlink (tests/behave/kernel_socket_iscsi)
modprobe -q scsi_transport_iscsi
mkdir -p "$VM_TREE"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none tree "$VM_TREE" || fail "mount tree"
if [ -n "$VM_HOST" ]; then
	# one of two hosts: eth0 on the socket link, rxe0 on eth0
	modprobe -q crc32_generic
	for m in virtio_net rdma_rxe ib_uverbs rdma_ucm; do modprobe $m || fail "modprobe $m"; done
	n=1; [ "$VM_HOST" = B ] && n=2
	ip addr add 10.1.0.$n/24 dev eth0 && ip link set eth0 up || fail eth0
	rdma link add rxe0 type rxe netdev eth0 || fail "rxe0"
	for _ in $(seq 100); do
		grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null && break
		sleep 0.1
	done
	export RXE_DEV0=rxe0 RXE_IP0=10.1.0.$n VM_HOST
elif [ "$VM_RXE" = 1 ]; then
	modprobe -q crc32_generic
	for m in rdma_rxe ib_uverbs rdma_ucm veth; do modprobe $m || fail "modprobe $m"; done
	ip link add veth0 type veth peer name veth1 || fail veth
	for k in all default; do sysctl -qw net.ipv4.conf.$k.accept_local=1 net.ipv4.conf.$k.rp_filter=0; done
	ip addr add 10.0.0.1/24 dev veth0; ip addr add 10.0.0.2/24 dev veth1
	for d in veth0 veth1; do
		sysctl -qw net.ipv4.conf.$d.accept_local=1 net.ipv4.conf.$d.rp_filter=0
		ip link set $d up
	done
	# to the other address through the veth pair, not through "lo"
	ip rule add pref 10 iif lo to 10.0.0.1 lookup 101
	ip rule add pref 11 iif lo to 10.0.0.2 lookup 102
	ip route add 10.0.0.1 dev veth1 src 10.0.0.2 table 101
	ip route add 10.0.0.2 dev veth0 src 10.0.0.1 table 102
	ip rule add pref 100 lookup local && ip rule del pref 0
	rdma link add rxe0 type rxe netdev veth0 || fail "rxe0"
	rdma link add rxe1 type rxe netdev veth1 || fail "rxe1"
	for _ in $(seq 100); do
		grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null &&
			grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null && break
		sleep 0.1
	done
	export RXE_DEV0=rxe0 RXE_DEV1=rxe1 RXE_IP0=10.0.0.1 RXE_IP1=10.0.0.2
fi
cd "$VM_TREE"
bash /etc/shunt-vm.cmd > $OUT 2>&1 < /dev/null
done_ $?
EOF
	chmod 755 "$1/init"
}

BASE=$CACHE/base-$KVER.cpio
exec 9> "$CACHE/.lock"
flock 9 # one builder at a time (tests/vm/pair.sh starts two guests)
if [ "$REBUILD" = 1 ] || [ ! -s "$BASE" ] || [ "$SELF" -nt "$BASE" ] || [ /var/lib/dpkg/status -nt "$BASE" ]; then
	t0=$(date +%s)
	R=$CACHE/root-$KVER
	rm -rf "$R"; mkdir -p "$R"/usr/{bin,sbin,lib,lib64} "$R"/{etc,proc,sys,dev,tmp,run,root}
	for d in bin sbin lib lib64; do ln -s usr/$d "$R/$d"; done
	for t in $PROGS; do
		p=$(command -v "$t" 2> /dev/null) || continue
		put "$R" "$(readlink -f "$p")"
		[ "$(readlink -f "$p")" = "$p" ] || { mkdir -p "$R$(dirname "$p")"; ln -sf "$(readlink -f "$p")" "$R$p"; }
	done
	for f in $EXTRA; do put "$R" "$f"; done
	for l in modprobe insmod lsmod; do ln -sf /usr/bin/kmod "$R/usr/sbin/$l"; done
	for l in iptables iptables-save; do ln -sf xtables-legacy-multi "$R/usr/sbin/$l"; done
	cp /bin/busybox "$R/usr/bin/busybox"
	for a in $(busybox --list-full); do
		d=$R/usr/${a#usr/}
		[ -e "$d" ] || [ -L "$d" ] || ln -s /usr/bin/busybox "$d"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n' > "$R/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' > "$R/etc/group"
	printf '127.0.0.1 localhost\n' > "$R/etc/hosts"
	echo 'hosts: files' > "$R/etc/nsswitch.conf"
	[ -z "$KR" ] || [ -s "$KR/lib/modules/$KVER/modules.dep" ] || depmod -b "$KR" "$KVER"
	for m in $MODULES; do
		modprobe ${KR:+-d "$KR"} -S "$KVER" --show-depends "$m" 2> /dev/null |
			awk '$1 == "insmod" { print $2 }'
	done | sort -u | while read -r ko; do
		mkdir -p "$R$(dirname "${ko#"$KR"}")"; cp "$ko" "$R${ko#"$KR"}"
	done
	# decompress here: the guest would do it under emulation
	find "$R/lib/modules" -name '*.ko.xz' -exec xz -d {} +
	find "$R/lib/modules" -name '*.ko.zst' -exec zstd -q -d --rm {} +
	cp "$KR"/lib/modules/"$KVER"/modules.{order,builtin,builtin.modinfo} "$R/lib/modules/$KVER/"
	depmod -b "$R" "$KVER"
	write_init "$R"
	(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$BASE.tmp"
	mv "$BASE.tmp" "$BASE"
	rm -rf "$R"
	say "guest image $BASE built in $(($(date +%s) - t0)) s"
fi
flock -u 9

# The kernel decompresses itself slowly under emulation: boot the ELF inside
# (PVH) when the kernel supports it, extracted once.
VMLINUX=$CACHE/vmlinux-$KVER KERNEL=$KR/boot/vmlinuz-$KVER
if [ ! -s "$VMLINUX" ] && grep -q '^CONFIG_PVH=y' "$KR/boot/config-$KVER" 2> /dev/null; then
	for z in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd'; do
		tool=${z%%:*}
		command -v "$tool" > /dev/null || continue
		for off in $(LC_ALL=C grep -obUaP "${z#*:}" "$KERNEL" | head -n3 | cut -d: -f1); do
			tail -c +$((off + 1)) "$KERNEL" | $tool -dc 2> /dev/null > "$VMLINUX.tmp" || true
			head -c4 "$VMLINUX.tmp" | grep -q ELF && { mv "$VMLINUX.tmp" "$VMLINUX"; break 2; }
		done
	done
	rm -f "$VMLINUX.tmp"
fi
[ -s "$VMLINUX" ] && KERNEL=$VMLINUX

# ---- this run: the command, the programs it needs, and boot ----
NET=()
if [ -n "$HOST" ]; then
	case ${HOST%%:*} in
	A) NET=(-netdev "socket,id=n0,udp=127.0.0.1:$((${HOST#*:} + 1)),localaddr=127.0.0.1:${HOST#*:}"
		-device virtio-net-pci,netdev=n0,mac=52:54:00:00:01:01) ;;
	B) NET=(-netdev "socket,id=n0,udp=127.0.0.1:${HOST#*:},localaddr=127.0.0.1:$((${HOST#*:} + 1))"
		-device virtio-net-pci,netdev=n0,mac=52:54:00:00:01:02) ;;
	*) echo "vm: -H A:PORT or B:PORT" >&2; exit 2 ;;
	esac
fi
RUN=$(mktemp -d "$CACHE/run.XXXXXX")
QPID=
finish() { local e=$?; [ -n "$QPID" ] && kill "$QPID" 2> /dev/null; [ -n "${KEEP:-}" ] || rm -rf "$RUN"; exit $e; }
trap finish EXIT
O=$RUN/ovl
mkdir -p "$O/etc"
if [ $# -eq 1 ]; then printf '%s\n' "$1"; else printf '%q ' "$@"; echo; fi > "$O/etc/shunt-vm.cmd"
printf 'VM_TREE=%q\nVM_RXE=%s\nVM_HOST=%s\n' "$TREE" "$RXE" "${HOST%%:*}" > "$O/etc/shunt-vm.conf"
# the libraries of whatever the tree built (libbpf, libibverbs, ...)
for f in "$TREE"/build/* "$TREE"/build/tests/*/*; do [ -f "$f" ] && [ -x "$f" ] && libs "$O" "$f"; done
(cd "$O" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) > "$RUN/ovl.cpio.gz"
cat "$BASE" "$RUN/ovl.cpio.gz" > "$RUN/initrd"
: > "$RUN/out"; : > "$RUN/rc"; : > "$RUN/console"
timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m "$MEM" -smp 2 \
	-nodefaults -no-user-config -display none -no-reboot \
	-kernel "$KERNEL" -initrd "$RUN/initrd" \
	-append "console=ttyS0 rdinit=/init panic=-1 mitigations=off quiet loglevel=${VM_LOGLEVEL:-4}" \
	-serial "file:$RUN/console" -serial null -serial null \
	-device virtio-serial-pci -chardev "file,id=o,path=$RUN/out" -device virtserialport,chardev=o,nr=1 \
	-chardev "file,id=r,path=$RUN/rc" -device virtserialport,chardev=r,nr=2 \
	-virtfs "local,path=$TREE,mount_tag=tree,security_model=none,id=tree" \
	${NET[@]+"${NET[@]}"} < /dev/null > "$RUN/qemu.log" 2>&1 &
QPID=$!
tail -n +1 -f --pid=$QPID "$RUN/out" &
[ "$VERBOSE" = 1 ] && tail -n +1 -f --pid=$QPID "$RUN/console" >&2 &
# A guest that reported its exit code gets 15 s to power off.  A guest
# kernel that soft-locked (the emulated device's own bug: Debian 12's rxe
# spins for ever now and then after dropped RoCE packets, docs/rdma.md)
# never recovers: it is stopped at once; one that panicked (6.12's rxe has
# been seen to, in the veth's receive path) powers off by itself (panic=-1,
# -no-reboot).  Either is said, with the report's first lines, exit code
# 126, so that a caller may boot a fresh guest rather than wait out the
# time limit or blame the command.
n=0 k=0 lockup=
while kill -0 $QPID 2> /dev/null; do
	[ -s "$RUN/rc" ] && { n=$((n + 1)); [ $n -gt 75 ] && kill $QPID; }
	k=$((k + 1))
	if [ $((k % 25)) = 0 ] && grep -q 'BUG: soft lockup' "$RUN/console" 2> /dev/null; then
		lockup=1
		kill $QPID
	fi
	sleep 0.2
done
set +e; wait $QPID; q=$?; set -e
QPID=
sleep 0.3
rc=$(tr -dc '0-9' < "$RUN/rc")
if [ -n "$lockup" ]; then
	say "the guest kernel soft-locked (rxe): stopped"; grep -m3 'soft lockup\|RIP:' "$RUN/console" >&2; rc=126
elif [ -z "$rc" ] && grep -q 'Kernel panic' "$RUN/console"; then
	say "the guest kernel panicked:"
	# the oops from its first line (6.12's rxe logs routine lines before);
	# with none, what led to the panic
	{ sed -n '/BUG:\|Oops\|general protection/,$p' "$RUN/console" | grep . ||
		grep -m1 -B20 'Kernel panic' "$RUN/console"; } | head -30 >&2
	rc=126
elif [ "$q" = 124 ] || [ "$q" = 137 ]; then
	say "time-out after $TIMEOUT s"; rc=124
elif [ -z "$rc" ]; then
	say "the guest ended without an exit code (qemu $q)"; rc=125
fi
if [ "$rc" = 125 ] || [ "$rc" = 124 ]; then
	tail -n 30 "$RUN/console" >&2; cat "$RUN/qemu.log" >&2
fi
exit "$rc"
