#!/usr/bin/env bash
# Description: a link whose memory-window binder fails (its queue pair in
# the error state: a device error) fails with it.  Six connections in turn
# between two processes (tests/tools/rekey, each slot re-keyed by a bind
# at its close); the server's third bind finds the binder broken
# (libshunt-faults.so SHUNT_FAULT_RDMA_BIND=3).  The connection that needed
# that key stays TCP (link-failed, 16), every byte intact, and the next
# ones make a new link and are RDMA again - before, the link stayed up
# without a binder and every later connection between the two processes
# stayed TCP.
set -eu
. "$(dirname "$0")/lib.sh"
REKEY=$BUILD/tests/tools/rekey
R=(env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1)
F=(env LD_PRELOAD="$BUILD/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 SHUNT_FAULT_RDMA_BIND=3)
die() { echo "FAIL: $*"; grep -E 'role=|fault|rdma:' /tmp/bd-s.out /tmp/bd-c.out | grep -v spare | tail -30; exit 1; }
: > /tmp/bd-s.out # a stale "listening" must not start the client
"${F[@]}" "$REKEY" server 10.0.0.1 7860 6 > /tmp/bd-s.out 2>&1 &
sp=$!
listening /tmp/bd-s.out
"${R[@]}" "$REKEY" client 10.0.0.1 7860 6 > /tmp/bd-c.out 2>&1 || die "client"
wait $sp || die "server"
grep -q "fault: bind 3 finds the binder in the error state" /tmp/bd-s.out || die "the fault did not fire"
grep -q "rdma: the window binder of the link to qp [0-9]* failed: the link goes" /tmp/bd-s.out ||
	die "the binder's failure was not taken for the link's"
[ "$(grep -c '^role=client conn=. mode=.* ok$' /tmp/bd-c.out)" = 6 ] || die "client: not 6 connections intact"
[ "$(grep -c '^role=server conn=. mode=.* ok$' /tmp/bd-s.out)" = 6 ] || die "server: not 6 connections intact"
grep -Eq '^role=server conn=. mode=tcp reason=16 ok$' /tmp/bd-s.out || die "no connection met the failed binder"
# the last two after the failure: RDMA again, on a new link
for c in 4 5; do
	grep -q "^role=server conn=$c mode=rdma reason=0 ok$" /tmp/bd-s.out || die "server's connection $c not on RDMA"
	grep -q "^role=client conn=$c mode=rdma reason=0 ok$" /tmp/bd-c.out || die "client's connection $c not on RDMA"
done
echo "binder: $(grep -c 'mode=rdma' /tmp/bd-s.out) of 6 connections rdma; the one that met the failed binder on TCP, intact; a new link after it"
