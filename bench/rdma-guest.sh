#!/usr/bin/env bash
# bench/rdma-guest.sh - runs INSIDE the Soft-RoCE guest (bench/rdma.sh boots
# it): between rxe1 (10.0.0.2) and rxe0 (10.0.0.1), one run, side by side:
# plain TCP over the same veth pair, shunt over RDMA, RDMA CM (cmtime) and
# rsocket on the same devices (not yet: see the end).  Prints a TSV.
set -u
cd "$(dirname "$0")/.."
B=build/shunt
build/shuntd --cgroup /sys/fs/cgroup --socket /tmp/a.sock > /tmp/a.log 2>&1 &
sleep 1
export SHUNT_BENCH_ADDR=10.0.0.1
R=(env LD_PRELOAD=$PWD/build/libshunt.so SHUNT_AGENT_SOCK=/tmp/a.sock SHUNT_TRANSPORT=rdma
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
# Not yet: cmtime (RDMA CM) and rstream (rsocket) side by side - in this
# guest kernel a cmtime run did not finish within minutes and could not be
# killed (RDMA CM teardown; docs/rdma.md), so they need their own guest run.
