#!/usr/bin/env bash
# Description: a peer's key reaches only its own connection's ring, and
# only while that connection lives.  Each ring of a link's receive region
# is reachable only through a memory window re-bound (a fresh key) for every
# connection that takes the slot; the region itself has no remote access.
# Four connections one after another between the same two processes reuse
# the link's slots; the client (libshunt-faults.so SHUNT_FAULT_RDMA_STALE)
# writes into a reused ring with the key of the connection that had it
# before - a replayed key (ReDMArk).  The server's device refuses it: the
# link fails, that connection moves to TCP with every byte intact, the next
# ones take a new link.  (With one key for the whole region, as before
# windows, the keys never change: the fault cannot even fire.)
set -eu
. "$(dirname "$0")/lib.sh"
REKEY=$BUILD/tests/tools/rekey
R=(env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1)
F=(env LD_PRELOAD="$BUILD/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 SHUNT_FAULT_RDMA_STALE=1)
die() { echo "FAIL: $*"; exit 1; }
: > /tmp/s.out # a stale "listening" must not start the client
"${R[@]}" "$REKEY" server 10.0.0.1 7795 4 >> /tmp/s.out 2>&1 &
sp=$!
listening /tmp/s.out
"${F[@]}" "$REKEY" client 10.0.0.1 7795 4 > /tmp/c.out 2>&1 || die "client: $(grep -v spare /tmp/c.out | tail -5)"
wait $sp || die "server: $(tail -5 /tmp/s.out)"
grep -q "fault: a new connection on ring .* writes with the old key" /tmp/c.out ||
	die "no slot was reused with a new key: $(grep -E 'role=|fault' /tmp/c.out)"
[ "$(grep -c '^role=client conn=. mode=.* ok$' /tmp/c.out)" = 4 ] || die "client: $(grep role= /tmp/c.out)"
[ "$(grep -c '^role=server conn=. mode=.* ok$' /tmp/s.out)" = 4 ] || die "server: $(grep role= /tmp/s.out)"
grep -Eq '^role=server conn=. mode=tcp reason=1[67] ok$' /tmp/s.out || die "no connection moved: $(grep role= /tmp/s.out)"
grep -q "rdma: link on .* failed" /tmp/s.out || die "the server's link did not fail: $(grep rdma: /tmp/s.out | tail -3)"
echo "isolation: a replayed key refused by the device; $(grep -c 'mode=rdma' /tmp/s.out) of 4 connections rdma, the one with the old key on TCP, all intact"
