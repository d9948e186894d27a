#!/usr/bin/env bash
# Description: unmodified redis-server and redis-benchmark across the two
# devices: under shunt every benchmark connection is RDMA (SHUNT_LOG lines
# counted on both sides), the replies are checked by redis-benchmark itself,
# and the requests/s of plain TCP over the same veth pair are measured in
# the same run for the ratio (emulated: behaviour, not speed).
set -eu
command -v redis-server > /dev/null || { echo "skip: no redis-server in the guest"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
bench() { # env... -> SET rps
	env "$@" redis-benchmark -h 10.0.0.1 -p 6390 -c 4 -n 1000 -t set -q 2> /tmp/rb.err |
		tr '\r' '\n' | awk '/SET: [0-9]/ { print $2 }' | tail -1
}
redis-server --port 6390 --bind 10.0.0.1 --save '' --appendonly no --protected-mode no > /tmp/rs-plain.log 2>&1 &
rs=$!
for _ in $(seq 100); do redis-cli -h 10.0.0.1 -p 6390 ping 2> /dev/null | grep -q PONG && break; sleep 0.1; done
plain=$(bench)
kill $rs; wait $rs 2> /dev/null || true
R=(LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1)
env "${R[@]}" redis-server --port 6390 --bind 10.0.0.1 --save '' --appendonly no --protected-mode no > /tmp/rs.log 2>&1 &
rs=$!
for _ in $(seq 100); do redis-cli -h 10.0.0.1 -p 6390 ping 2> /dev/null | grep -q PONG && break; sleep 0.1; done
acc=$(bench "${R[@]}")
for v in "$plain" "$acc"; do
	awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || die "redis-benchmark: '$plain' / '$acc': $(tail -3 /tmp/rb.err)"
done
n=$(grep -c 'accept fd .*: rdma' /tmp/rs.log || true)
[ "$n" -ge 4 ] || die "server accepted $n connections over RDMA: $(grep accept /tmp/rs.log | tail -3)"
# (the plain redis-cli pings are the server's only TCP connections)
grep -q 'connect fd .*: tcp' /tmp/rb.err && die "a benchmark connection stayed on TCP: $(grep 'connect fd' /tmp/rb.err | head -3)"
[ "$(grep -c 'connect fd .*accelerated (rdma)' /tmp/rb.err)" -ge 4 ] || die "client side: $(grep connect /tmp/rb.err | head)"
kill $rs; wait $rs 2> /dev/null || true
echo "redis SET rps: tcp $plain, shunt rdma $acc ($n connections over RDMA)" | tee -a "${RESULTS:-/dev/null}"
