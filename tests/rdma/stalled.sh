#!/usr/bin/env bash
# Description: a closing cursor message not acknowledged in time on a link
# that works (a long send queue on a lossy fabric, a stopped peer) moves
# that connection alone to TCP.  Two connections share one link; the
# client's first shutdown is taken as unacknowledged (libshunt-faults.so
# SHUNT_FAULT_RDMA_STALL=1).  That connection moves (rdma-stalled, 26; the
# server: peer-failover, 17) with every byte; the second stays on RDMA at
# both ends.  Before, such a move was announced as a failed link and the
# peer broke the link under every other connection (the split stress's
# cascade, docs/rdma.md).
set -eu
. "$(dirname "$0")/lib.sh"
T=$BUILD/tests/tools/stalled
die() { echo "FAIL: $*"; tail -5 /tmp/st-s.out; tail -5 /tmp/st-c.out; exit 1; }
: > /tmp/st-s.out # a stale "listening" must not start the client
env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 60 "$T" server 10.0.0.1 7830 > /tmp/st-s.out 2>&1 &
sp=$!
listening /tmp/st-s.out
env LD_PRELOAD="$(dirname "$LIB")/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 \
	SHUNT_FAULT_RDMA_STALL=1 timeout 60 "$T" client 10.0.0.1 7830 > /tmp/st-c.out 2>&1 || die "client"
wait $sp || die "server"
grep -q 'fault: a closing cursor message taken as not acknowledged' /tmp/st-c.out || die "the fault did not fire"
grep -q 'role=client conn=0 mode=tcp reason=26$' /tmp/st-c.out || die "client's first: $(grep role= /tmp/st-c.out)"
grep -q 'role=server conn=0 mode=tcp reason=17$' /tmp/st-s.out || die "server's first: $(grep role= /tmp/st-s.out)"
grep -q 'role=client conn=1 mode=rdma reason=0$' /tmp/st-c.out || die "client's second: $(grep role= /tmp/st-c.out)"
grep -q 'role=server conn=1 mode=rdma reason=0$' /tmp/st-s.out || die "server's second: $(grep role= /tmp/st-s.out)"
grep -q 'failed' /tmp/st-c.out /tmp/st-s.out && die "a link was taken for failed: $(grep failed /tmp/st-c.out /tmp/st-s.out)"
echo "stalled: one connection's unacknowledged closing word moved it alone to TCP, intact; the link carried the other on RDMA"
