#!/usr/bin/env bash
# Description: a link whose client end dies while it carries nothing.  The
# client (tests/tools/relink) makes a connection over RDMA and closes it;
# 1.5 s later every link of the client dies without a post
# (libshunt-faults.so SHUNT_FAULT_RDMA_DIE_MS) - the server, which posts
# nothing on an empty link, never hears of it and keeps the link.  The
# next connection's ACCEPT names the dead queue pair: the client declines
# it (stale-link, reason 27; the connection is plain TCP, its bytes
# intact), and the server retires its end of the link, so the third and
# fourth connections make a new link and are RDMA again.  (Before reason
# 27 every later connection between the two processes stayed TCP - until
# the server's own queue pair failed, which an idle one never does.)
set -eu
. "$(dirname "$0")/lib.sh"
R=$BUILD/tests/tools/relink
die() { echo "FAIL: $*"; cat /tmp/rl-s.out; cat /tmp/rl-c.out; exit 1; }
: > /tmp/rl-s.out # a stale "listening" must not start the client
env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 90 "$R" server 10.0.0.1 7830 > /tmp/rl-s.out 2>&1 &
sp=$!
listening /tmp/rl-s.out
env LD_PRELOAD="$(dirname "$LIB")/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 \
	SHUNT_FAULT_RDMA_DIE_MS=1500 timeout 90 "$R" client 10.0.0.1 7830 > /tmp/rl-c.out 2>&1 || die "client"
wait $sp || die "server"
grep -q 'fault: every link dies' /tmp/rl-c.out || die "the fault did not fire"
for role in client server; do
	f=/tmp/rl-${role:0:1}.out
	grep -q "conn=1 role=$role mode=rdma reason=0" $f || die "$role: the first connection was not RDMA"
	grep -q "conn=2 role=$role mode=tcp reason=27" $f || die "$role: the second connection: $(grep conn=2 $f)"
	grep -q "conn=3 role=$role mode=rdma reason=0" $f || die "$role: the third connection: $(grep conn=3 $f)"
	grep -q "conn=4 role=$role mode=rdma reason=0" $f || die "$role: the fourth connection: $(grep conn=4 $f)"
done
grep -q 'our link to it retires' /tmp/rl-s.out || die "the server did not say it retired the link"
echo "stale_link: the dead queue pair was declined once, the server retired its end, RDMA again after"
