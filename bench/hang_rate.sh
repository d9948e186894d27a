#!/usr/bin/env bash
# bench/hang_rate.sh - how often a connection whose ends both write before
# they read (tests/behave/rings_full) hangs, plain TCP against shunt over
# RDMA, alternated in one Soft-RoCE guest run: RUNS runs (default 30) of
# each, for each size in KiB (default 1536 2048), a run hung if it has not
# ended in 20 s.  The table goes to docs/bench/hang-rate.tsv (and .png).
# Emulated devices: the figures tell behaviour, not speed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != guest ]; then
	make -s all tests
	tests/vm/run.sh -t 2300 -- env RUNS="${RUNS:-30}" SIZES="${SIZES:-1536 2048}" bash bench/hang_rate.sh guest |
		tee /tmp/hang-rate.out
	grep -E '^(size|[0-9])' /tmp/hang-rate.out > docs/bench/hang-rate.tsv
	. bench/bars.sh
	bars docs/bench/hang-rate "both ends writing first: runs hung of ${RUNS:-30}" "runs hung" "" tcp shunt-rdma
	exit 0
fi
# inside the guest (tests/vm/run.sh)
export SHUNT_DIR=/tmp/shunt-rdma SHUNT_TEST_ADDR=10.0.0.1
mkdir -p "$SHUNT_DIR"
build/shuntd --cgroup /sys/fs/cgroup > /tmp/shuntd.log 2>&1 &
for _ in $(seq 100); do grep -q ready /tmp/shuntd.log && break; sleep 0.1; done
T=build/tests/behave/rings_full
printf 'size_kib\tvariant\truns\thung\n'
for kb in $SIZES; do
	plain=0 rdma=0
	for _ in $(seq "$RUNS"); do
		timeout 20 env RINGS_FULL_KB="$kb" "$T" > /dev/null 2>&1 || { plain=$((plain + 1)); pkill -9 rings_full || true; }
		timeout 20 env RINGS_FULL_KB="$kb" SHUNT_ACCEPT_WAIT_MS=30000 SHUNT_RDMA_ACK_TIMEOUT=17 \
			SHUNT_TRANSPORT=rdma SHUNT_EXPECT=rdma LD_PRELOAD="$PWD/build/libshunt.so" "$T" > /dev/null 2>&1 ||
			{ rdma=$((rdma + 1)); pkill -9 rings_full || true; }
	done
	printf '%s\ttcp\t%s\t%s\n%s\tshunt-rdma\t%s\t%s\n' "$kb" "$RUNS" "$plain" "$kb" "$RUNS" "$rdma"
done
