#!/usr/bin/env bash
# bench/smc/smc-guest.sh - runs INSIDE a Soft-RoCE guest booted from
# Debian's 6.12 kernel (bench/smc.sh boots it): the kernel's own SMC-R next
# to shunt over RDMA and plain TCP, on the same rxe devices and the same veth
# pair (10.0.0.2 -> 10.0.0.1), with the same unmodified programs: shunt's
# bench worker and rdma-core's rstream (-T s: the socket API).  SMC-R v2
# needs a pnet table and a UEID (bench/smc/smc-config.c); SMC carries a
# program's TCP sockets through bench/smc/smc-preload.so, as smc_run does.
# The RoCE packets each variant sent show who really used RDMA.  Prints a TSV.
set -u
cd "$(dirname "$0")/../.."
B=build/shunt C=build/bench/smc-config
modprobe smc && modprobe smc_diag || { echo "no smc module"; exit 1; }
$C pnet PNETA veth0 rxe0 1 && $C pnet PNETB veth1 rxe1 1 && $C ueid SHUNT-BENCH ||
	{ echo "smc configuration failed"; exit 1; }
build/shuntd --cgroup /sys/fs/cgroup > /tmp/a.log 2>&1 &
sleep 1
mkdir -p /tmp/sd
export SHUNT_BENCH_ADDR=10.0.0.1
row() { printf '%s\t%s\t%s\t%s\n' "$@"; }
pkts() { cat /sys/class/infiniband/rxe[01]/ports/1/hw_counters/sent_pkts | awk '{ s += $1 } END { print s }'; }
rs() { # size count: rstream's usec/xfer (half a round trip), under "${P[@]}"
	local p=$((7470 + RANDOM % 100))
	timeout -s KILL 120 "${P[@]}" rstream -T s -p $p -b 10.0.0.1 -S "$1" -C "$2" > /dev/null 2>&1 &
	local sp=$!
	sleep 0.5
	timeout -s KILL 120 "${P[@]}" rstream -T s -p $p -s 10.0.0.1 -S "$1" -C "$2" | awk 'NR == 2 { print $NF }'
	wait $sp 2> /dev/null
}
row test variant value unit
for v in tcp shunt-rdma smc-r; do
	case $v in
	tcp) P=(env) ;;
	shunt-rdma) P=(env LD_PRELOAD=$PWD/build/libshunt.so SHUNT_TRANSPORT=rdma
		       SHUNT_ACCEPT_WAIT_MS=30000 SHUNT_DIR=/tmp/sd) ;;
	smc-r) P=(env LD_PRELOAD=$PWD/build/bench/smc-preload.so) ;;
	esac
	p0=$(pkts)
	row setup+first-byte "$v" "$(timeout -s KILL 300 "${P[@]}" $B bench-worker setup 100)" us
	for m in 64 16384; do
		row "rtt-${m}B" "$v" "$(timeout -s KILL 300 "${P[@]}" $B bench-worker pingpong tcp $m 2000)" us
	done
	row stream-64KiB "$v" "$(timeout -s KILL 300 "${P[@]}" $B bench-worker stream tcp 65536 67108864)" GB/s
	row rstream-64B "$v" "$(rs 64 2000)" us/xfer
	row rstream-64KiB "$v" "$(rs 65536 500)" us/xfer
	row roce-packets "$v" $(($(pkts) - p0)) packets
done
