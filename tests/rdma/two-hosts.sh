#!/usr/bin/env bash
# Runs in BOTH guests of tests/vm/pair.sh (see tests/integration/rdma2.sh):
# each host starts its own agent; A serves, B connects.  With no forcing at
# all (two kernels: two boot ids) the negotiation picks RDMA.  In order:
#   1. the checksummed peers, both orders (mode rdma on both hosts);
#   2. checksummed streams both ways at once: 8 connections sharing one
#      link (blocking), 2 connections (edge-triggered epoll);
#   3. the same with B's queue pair broken at an exact byte
#      (libshunt-faults.so): every byte arrives, both hosts on TCP (16/17);
#   4. the behaviour programs that can be split (tests/behave/common.h
#      "split mode"; the others hold both ends in one process for fork,
#      exec and signal semantics) with their server on A and client on B,
#      both ends checked to be on RDMA;
#   5. unmodified redis-server on A, redis-benchmark on B (every benchmark
#      connection over RDMA on both hosts);
#   6. unmodified iperf3 server on A, client on B, over RDMA.
# Every line B prints that starts with "ok " is one check passed.
set -u
BUILD=${BUILD:-build}
build() { echo "$PWD/$BUILD/$1"; }
"$(build shuntd)" --cgroup /sys/fs/cgroup > /tmp/a.log 2>&1 &
for _ in $(seq 100); do grep -q ready /tmp/a.log && break; sleep 0.1; done
# the ACK timeout as in tests/rdma/run.sh: the UDP link between the two
# QEMU processes drops frames under load, rxe's retries would give up
export SHUNT_ACCEPT_WAIT_MS=30000 SHUNT_RDMA_ACK_TIMEOUT=17 SHUNT_LOG=1
S=("$(build shunt)" run --)
FAULTS=(env LD_PRELOAD="$(build libshunt-faults.so)" SHUNT_FAULT_RDMA=2000000)
PEER=$(build tests/tools/peer)
STREAM=$(build tests/tools/stream)
fail() { echo "FAIL: $*"; exit 1; }
# Split behaviour programs: rendezvous files on the tree both guests mount.
SPLIT=$PWD/$BUILD/tmp/split.${SPLIT_ID:?set by tests/integration/rdma2.sh}
mkdir -p "$SPLIT"
# SPLIT_ONLY="a b": only those (to reproduce one faster); SPLIT_REPEAT=N:
# each N times (a flake's rate)
split_programs() {
	local l
	l=$(grep -l 'test_fork()\|serve_in_child(\|split_is(' $(grep -L 'NOT_OVER_RDMA\|NOT_SPLIT_OVER_RDMA' tests/behave/*.c) |
		xargs -n1 basename | sed 's/\.c$//' | { if [ -n "${SPLIT_ONLY:-}" ]; then grep -xF "$(tr ' ' '\n' <<< "$SPLIT_ONLY")"; else cat; fi; })
	for _ in $(seq "${SPLIT_REPEAT:-1}"); do echo "$l"; done
}
split_run() { # ROLE PROGRAM INDEX
	"${S[@]}" env SHUNT_TEST_SPLIT="$1" SHUNT_TEST_ADDR=10.1.0.1 SHUNT_TEST_PORT=$((7500 + 10 * $3)) \
		SHUNT_TEST_SYNC="$SPLIT/$2.$3" SHUNT_EXPECT=rdma timeout 300 "$(build tests/behave/"$2")"
}
# A's servers end soon after B does, however B ends (it marks its end): a
# failure on B must not leave A waiting for the guest's time limit.
serve() {
	"$@" &
	local p=$! w rc
	(while kill -0 $p 2> /dev/null; do
		[ -e "$SPLIT/b-done" ] && { sleep 20; pkill -P $p; kill $p 2> /dev/null && echo "B ended first: stopped $*"; break; }
		sleep 1
	done) &
	w=$!
	wait $p
	rc=$?
	kill $w 2> /dev/null
	wait $w 2> /dev/null
	return $rc
}
retry() { # until A's server listens
	for _ in $(seq 300); do "$@" > /tmp/c.out 2>&1 && return 0; sleep 0.2; done
	cat /tmp/c.out; return 1
}
if [ "$VM_HOST" = A ]; then
	for o in cfirst sfirst; do
		serve "${S[@]}" "$PEER" server 10.1.0.1 7400 $o || exit 1
	done
	serve "${S[@]}" "$STREAM" server 10.1.0.1 7401 16 block 8 | grep role= || exit 1
	serve "${S[@]}" "$STREAM" server 10.1.0.1 7402 16 epoll 2 | grep role= || exit 1
	serve "${S[@]}" "$STREAM" server 10.1.0.1 7403 16 block 2 | grep role= || exit 1
	i=0
	for n in $([ "${SPLIT_BEHAVE:-1}" = 1 ] && split_programs); do
		i=$((i + 1))
		serve split_run server "$n" $i > /tmp/behave.out 2>&1
		rc=$?
		[ "${SPLIT_REPEAT:-1}" = 1 ] || cp /tmp/behave.out "$PWD/$BUILD/tmp/splitlog.$n.$i.A"
		echo $rc > "$SPLIT/$n.$i.st" && mv "$SPLIT/$n.$i.st" "$SPLIT/$n.$i.status"
		[ $rc = 0 ] || { echo "behave $n (server) rc $rc:"; tail -5 /tmp/behave.out; }
	done
	serve "${S[@]}" redis-server --port 6390 --bind 10.1.0.1 --save '' --appendonly no \
		--protected-mode no > /tmp/rs.log 2>&1 || exit 1
	echo "redis server accepted over rdma: $(grep -c 'accept fd .*: rdma' /tmp/rs.log)"
	serve "${S[@]}" iperf3 -s -1 -B 10.1.0.1 -p 5301 > /tmp/ip.log 2>&1 || { cat /tmp/ip.log; exit 1; }
	echo "iperf3 server accepted over rdma: $(grep -c 'accept fd .*: rdma' /tmp/ip.log)"
else
	trap 'touch "$SPLIT/b-done"' EXIT
	for o in cfirst sfirst; do
		retry "${S[@]}" "$PEER" client 10.1.0.1 7400 $o || fail "peers $o"
		cat /tmp/c.out
		grep -q 'role=client mode=rdma reason=0' /tmp/c.out || exit 1
	done
	retry "${S[@]}" "$STREAM" client 10.1.0.1 7401 16 block 8 || fail "stream block"
	[ "$(grep -c 'mode=rdma reason=0 .* ok$' /tmp/c.out)" = 8 ] || fail "stream block: $(grep role= /tmp/c.out)"
	echo "ok stream: 8 connections on one link, 16 MiB each way each, intact, rdma"
	retry "${S[@]}" "$STREAM" client 10.1.0.1 7402 16 epoll 2 || fail "stream epoll"
	[ "$(grep -c 'mode=rdma reason=0 .* ok$' /tmp/c.out)" = 2 ] || fail "stream epoll: $(grep role= /tmp/c.out)"
	echo "ok stream: edge-triggered epoll, 2 connections, intact, rdma"
	retry "${FAULTS[@]}" "$STREAM" client 10.1.0.1 7403 16 block 2 || fail "stream with the link broken"
	[ "$(grep -Ec 'mode=tcp reason=1[67] .* ok$' /tmp/c.out)" = 2 ] || fail "failover: $(grep -v spare /tmp/c.out | tail)"
	echo "ok failover: queue pair broken after 2,000,000 bytes, intact, on TCP"
	i=0 bad=0
	for n in $([ "${SPLIT_BEHAVE:-1}" = 1 ] && split_programs); do
		i=$((i + 1))
		t0=${EPOCHREALTIME/./}
		split_run client "$n" $i > /tmp/behave.out 2>&1
		rc=$?
		[ "${SPLIT_REPEAT:-1}" = 1 ] || cp /tmp/behave.out "$PWD/$BUILD/tmp/splitlog.$n.$i.B"
		for _ in $(seq 300); do [ -e "$SPLIT/$n.$i.status" ] && break; sleep 0.2; done
		st=$(cat "$SPLIT/$n.$i.status" 2> /dev/null || echo none)
		if [ $rc = 0 ] && [ "$st" = 0 ]; then
			echo "ok behave $n: server on A, client on B, both on rdma ($(((${EPOCHREALTIME/./} - t0) / 1000)) ms)"
		else
			echo "FAIL behave $n: client rc $rc, server rc $st"; tail -5 /tmp/behave.out; bad=1
		fi
	done
	[ $bad = 0 ] || fail "behaviour programs across hosts"
	for _ in $(seq 300); do redis-cli -h 10.1.0.1 -p 6390 ping 2> /dev/null | grep -q PONG && break; sleep 0.2; done
	"${S[@]}" redis-benchmark -h 10.1.0.1 -p 6390 -c 4 -n 2000 -t set,get -q > /tmp/rb.out 2> /tmp/rb.err
	rc=$?
	redis-cli -h 10.1.0.1 -p 6390 shutdown nosave > /dev/null 2>&1
	[ $rc = 0 ] || fail "redis-benchmark: $(tail -3 /tmp/rb.err)"
	grep -q 'connect fd .*: tcp' /tmp/rb.err && fail "a benchmark connection stayed on TCP"
	n=$(grep -c 'connect fd .*accelerated (rdma)' /tmp/rb.err)
	[ "$n" -ge 4 ] || fail "redis-benchmark connections over rdma: $n"
	echo "ok redis across hosts: $n benchmark connections over rdma; $(tr '\r' '\n' < /tmp/rb.out | grep -E '^(SET|GET): [0-9.]+ requests' | cut -d, -f1 | tr '\n' ' ')"
	retry "${S[@]}" iperf3 -c 10.1.0.1 -p 5301 -t 2 || fail "iperf3: $(tail -3 /tmp/c.out)"
	grep -q 'connect fd .*: tcp' /tmp/c.out && fail "an iperf3 connection stayed on TCP"
	echo "ok iperf3 across hosts over rdma: $(grep -c 'accelerated (rdma)' /tmp/c.out) connections; $(grep receiver /tmp/c.out | tail -1 | awk '{print $7, $8}')"
fi
