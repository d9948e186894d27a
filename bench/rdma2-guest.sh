#!/usr/bin/env bash
# bench/rdma2-guest.sh - runs INSIDE each of two guests (bench/rdma2.sh
# boots them with tests/vm/pair.sh): host A serves, host B measures, across
# two kernels joined by a virtual link, each with its own rxe device and
# agent.  Plain TCP and shunt (RDMA chosen by the negotiation, nothing
# forced) side by side with the same unmodified programs: redis-benchmark
# against redis-server, iperf3.  B prints a TSV.
set -u
cd "$(dirname "$0")/.."
SYNC=build/bench/rdma2.sync
build/shuntd --cgroup /sys/fs/cgroup > /tmp/a.log 2>&1 &
sleep 1
mkdir -p /tmp/sd
S=(env LD_PRELOAD=$PWD/build/libshunt.so SHUNT_ACCEPT_WAIT_MS=30000 SHUNT_DIR=/tmp/sd)
R=(--save '' --appendonly no --protected-mode no)
if [ "$VM_HOST" = A ]; then
	redis-server --port 6390 "${R[@]}" > /tmp/r1.log 2>&1 &
	"${S[@]}" redis-server --port 6391 "${R[@]}" > /tmp/r2.log 2>&1 &
	iperf3 -s -p 5201 > /dev/null 2>&1 &
	"${S[@]}" iperf3 -s -p 5202 > /dev/null 2>&1 &
	sleep 2
	echo ready > "$SYNC.a"
	for _ in $(seq 1200); do [ -e "$SYNC.b" ] && break; sleep 0.5; done
	rm -f "$SYNC.a" "$SYNC.b"
	exit 0
fi
for _ in $(seq 600); do [ -e "$SYNC.a" ] && break; sleep 0.5; done
row() { printf '%s\t%s\t%s\t%s\n' "$@"; }
rb() { # variant port test conns -> requests/s
	local p=(env)
	[ "$1" = shunt-rdma ] && p=("${S[@]}")
	"${p[@]}" redis-benchmark -h 10.1.0.1 -p "$2" -c "$4" -n $((500 * $4)) -t "$3" -q 2>&1 |
		tr '\r' '\n' | awk '/per second/ { v = $2 } END { print v }'
}
ip3() { # variant port -> Mbit/s (receiver)
	local p=(env)
	[ "$1" = shunt-rdma ] && p=("${S[@]}")
	timeout 60 "${p[@]}" iperf3 -c 10.1.0.1 -p "$2" -t 8 -f m 2>&1 | awk '/receiver/ { print $(NF - 2) }'
}
row test variant value unit
for v in tcp shunt-rdma; do
	port=6390 iport=5201
	[ $v = shunt-rdma ] && port=6391 iport=5202
	for c in 1 8; do
		row "redis-get-c$c" $v "$(rb $v $port get $c)" req/s
		row "redis-set-c$c" $v "$(rb $v $port set $c)" req/s
	done
	row iperf3 $v "$(ip3 $v $iport)" Mbit/s
done
touch "$SYNC.b"
