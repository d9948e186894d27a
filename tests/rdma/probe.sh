#!/usr/bin/env bash
# Description: the zero-window probe.  A server writes 2 MiB to a client
# that shut its sending half at once and does not read for 4 s, so the
# server's writer waits on a full ring; 1.5 s in, the client's end of the
# link dies without a post (libshunt-faults.so SHUNT_FAULT_RDMA_DIE_MS): its
# FIN went long ago, so it cannot tell the server on the socket.  The
# server (non-blocking, waiting in edge-triggered epoll) probes - one cursor
# message a second while a writer waits - and the post fails
# on the dead queue pair, the connection moves to TCP, and the client
# reads every byte, then EOF.  Without the probe both wait for ever.
set -eu
. "$(dirname "$0")/lib.sh"
Z=$BUILD/tests/tools/zwin
die() { echo "FAIL: $*"; tail -5 /tmp/zw-s.out; tail -5 /tmp/zw-c.out; exit 1; }
: > /tmp/zw-s.out # a stale "listening" must not start the client
env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 60 "$Z" server 10.0.0.1 7820 > /tmp/zw-s.out 2>&1 &
sp=$!
listening /tmp/zw-s.out
env LD_PRELOAD="$(dirname "$LIB")/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 \
	SHUNT_FAULT_RDMA_DIE_MS=1500 timeout 60 "$Z" client 10.0.0.1 7820 > /tmp/zw-c.out 2>&1 || die "client"
wait $sp || die "server"
grep -q 'fault: every link dies' /tmp/zw-c.out || die "the fault did not fire"
grep -q 'role=client mode=tcp reason=16 ok' /tmp/zw-c.out || die "client: $(grep role= /tmp/zw-c.out)"
grep -Eq 'role=server mode=tcp reason=1[67] ok' /tmp/zw-s.out || die "server: $(grep role= /tmp/zw-s.out)"
echo "probe: a writer on a full window learnt that the peer's end died after its FIN; 2 MiB intact on TCP"
