#!/usr/bin/env bash
# bench/rdma-guest.sh - runs INSIDE the Soft-RoCE guest (bench/rdma.sh boots
# it): between rxe1 (10.0.0.2) and rxe0 (10.0.0.1), one run, side by side:
# plain TCP over the same veth pair, shunt over RDMA, RDMA CM (cmtime) and
# rsocket (rstream) on the same devices.  Prints a TSV.
set -u
cd "$(dirname "$0")/.."
B=build/shunt
build/shuntd --cgroup /sys/fs/cgroup > /tmp/a.log 2>&1 &
sleep 1
export SHUNT_BENCH_ADDR=10.0.0.1
R=(env LD_PRELOAD=$PWD/build/libshunt.so SHUNT_TRANSPORT=rdma
   SHUNT_ACCEPT_WAIT_MS=30000 SHUNT_DIR=/tmp/sd)
mkdir -p /tmp/sd
row() { printf '%s\t%s\t%s\t%s\n' "$@"; }
row test variant value unit
row setup+first-byte tcp "$($B bench-worker setup 200)" us
row setup+first-byte shunt-rdma "$("${R[@]}" $B bench-worker setup 200)" us
for m in 64 16384; do
	row "rtt-${m}B" tcp "$($B bench-worker pingpong tcp $m 2000)" us
	row "rtt-${m}B" shunt-rdma "$("${R[@]}" $B bench-worker pingpong tcp $m 2000)" us
done
row stream-64KiB tcp "$($B bench-worker stream tcp 65536 67108864)" GB/s
row stream-64KiB shunt-rdma "$("${R[@]}" $B bench-worker stream tcp 65536 67108864)" GB/s
# The first connection of a fresh process: its link to a new peer is made
# on the connection's path (median of 10 processes, one connection each).
med() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
row setup-new-peer shunt-rdma "$(for _ in $(seq 10); do "${R[@]}" $B bench-worker setup 1; done | med)" us
# RDMA CM's own connection setup (cmtime, one connection per run: create
# id, resolve address and route, create the QP, connect), median of 10
cm_one() {
	timeout -s KILL 20 cmtime -b 10.0.0.1 -c 1 > /dev/null 2>&1 &
	local sp=$!
	sleep 0.3
	timeout -s KILL 20 cmtime -s 10.0.0.1 -c 1 2> /dev/null |
		awk '/^(create id|resolve addr|resolve route|create qp|connect) / { s += $(NF - 3) }
		     END { if (s) printf "%.3f\n", s * 1000 }'
	wait $sp 2> /dev/null
}
row setup-new-peer rdma-cm "$(for _ in $(seq 10); do cm_one; done | med)" us
# rstream (rdma-core's rsocket benchmark): the same program over TCP
# (-T s), over shunt (-T s under the shim) and over rsocket; usec/xfer is
# rstream's own figure, half a round trip of SIZE bytes each way.
rs() { # variant size count
	local pre=() opt=(-T s) p=$((7470 + RANDOM % 100))
	case $1 in shunt-rdma) pre=("${R[@]}") ;; rsocket) opt=() ;; esac
	timeout -s KILL 120 "${pre[@]}" rstream "${opt[@]}" -p $p -b 10.0.0.1 -S "$2" -C "$3" > /dev/null 2>&1 &
	local sp=$!
	sleep 0.5
	timeout -s KILL 120 "${pre[@]}" rstream "${opt[@]}" -p $p -s 10.0.0.1 -S "$2" -C "$3" |
		awk 'NR == 2 { print $NF }'
	wait $sp 2> /dev/null
}
for v in tcp shunt-rdma rsocket; do
	row rstream-64B "$v" "$(rs $v 64 2000)" us/xfer
	row rstream-64KiB "$v" "$(rs $v 65536 500)" us/xfer
done
