#!/usr/bin/env bash
# Description: two hosts for real: two Soft-RoCE guests (two kernels, two
# agents, two boot ids) joined by a QEMU socket netdev (tests/vm/pair.sh).
# With nothing forced, the agents' option exchange and the in-band
# handshake choose RDMA; the checksummed peers run both orders and report
# mode rdma on both hosts; checksummed two-way streams (8 connections on
# one link, epoll), a link broken at an exact byte (failover to TCP, every
# byte intact), the behaviour programs that can be split run with their
# server on A and client on B, unmodified redis and iperf3 run across the hosts
# (tests/rdma/two-hosts.sh).  Skipped (77) only where QEMU cannot run.
# Time limit: 1200
. "$(dirname "$0")/lib.sh"
# SPLIT_BEHAVE=0 leaves out the split behaviour programs, SPLIT_ONLY="a b"
# runs only those (to reproduce something faster), SPLIT_REPEAT=N each N times
nsplit=0
[ "${SPLIT_BEHAVE:-1}" = 1 ] &&
	nsplit=$(grep -l 'test_fork()\|serve_in_child(\|split_is(' $(grep -L 'NOT_OVER_RDMA\|NOT_SPLIT_OVER_RDMA' "$ROOT"/tests/behave/*.c) |
		xargs -n1 basename | sed 's/\.c$//' |
		{ if [ -n "${SPLIT_ONLY:-}" ]; then grep -cxF "$(tr ' ' '\n' <<< "$SPLIT_ONLY")"; else wc -l; fi; })
nsplit=$((nsplit * ${SPLIT_REPEAT:-1}))
# A guest kernel that soft-locks or panics (rxe under emulation,
# tests/vm/run.sh says so) is not shunt's outcome: both guests run once
# more, and it is said.
for attempt in 1 2; do
	out=$("$ROOT/tests/vm/pair.sh" -t 900 -- env BUILD="$BUILD" SPLIT_BEHAVE="${SPLIT_BEHAVE:-1}" SPLIT_ONLY="${SPLIT_ONLY:-}" SPLIT_REPEAT="${SPLIT_REPEAT:-1}" SPLIT_ID=$$.$RANDOM bash tests/rdma/two-hosts.sh 2>&1)
	rc=$?
	rm -rf "$ROOT/$BUILD/tmp/split.$$".*
	[ $rc != 0 ] && [ $attempt = 1 ] && echo "$out" | grep -q '^\[[AB]\] vm: the guest kernel' || break
	echo "rdma2: a guest kernel failed; both guests once more:"
	echo "$out" | grep -A12 '^\[[AB]\] vm: the guest kernel' | head -30
done
[ $rc = 77 ] && { echo "$out" | tail -3; exit 77; }
# A's failures are printed before B's end, and the runner shows a failure's
# last lines: the end, then every behaviour program's failure on both hosts
[ $rc = 0 ] || die "two hosts (rc $rc): $(echo "$out" | tail -30; echo '--- the failures:'
	echo "$out" | grep -A7 -E '^\[A\] behave .* \(server\) rc|^\[B\] FAIL behave' | head -40)"
[ "$(echo "$out" | grep -c '^\[A\] role=server mode=rdma reason=0')" = 2 ] || die "host A: $(echo "$out" | grep role=)"
[ "$(echo "$out" | grep -c '^\[B\] role=client mode=rdma reason=0')" = 2 ] || die "host B: $(echo "$out" | grep role=)"
[ "$(echo "$out" | grep -c '^\[B\] ok ')" = $((5 + nsplit)) ] || die "host B: $(echo "$out" | grep -v spare | tail -20)"
echo "$out" | grep '^\[B\] ok ' | sed 's/^\[B\] ok /rdma2: /'
echo "rdma2: two hosts, two kernels, two agents: RDMA chosen, data intact, both orders"
