#!/usr/bin/env bash
# Description: a hostile RDMA server whose ACCEPTs name, as the client's
# queue pair to connect, a spare the client offered in an earlier
# connection (back in its pool, or held by another connection's offer),
# at a GID no route reaches (libshunt-faults.so SHUNT_FAULT_RDMA_FOREIGN=1).
# The client's connect of that spare fails: each such connection stays
# TCP, every byte intact, and the spare is freed - before, one taken from
# the pool was put on the list of offers in flight, where nothing ever
# freed it: a queue pair and 16 MiB of rings per ACCEPT, for the process's
# life.  Four rounds of 8 connections at once (tests/tools/burstlink): the
# client's mappings after each round's idle time do not grow (previous
# library: 261, 302, 349 after rounds 1 to 3; now 173-174 each).
set -eu
. "$(dirname "$0")/lib.sh"
T=$BUILD/tests/tools/burstlink
die() { echo "FAIL: $*"; grep -hv "connect fd\|accept fd\|handshake fd" /tmp/fr-s.out /tmp/fr-c.out | tail -40; exit 1; }
: > /tmp/fr-s.out # a stale "listening" must not start the client
env LD_PRELOAD="$(dirname "$LIB")/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 \
	SHUNT_FAULT_RDMA_FOREIGN=1 timeout 90 "$T" server 10.0.0.1 7850 > /tmp/fr-s.out 2>&1 &
sp=$!
listening /tmp/fr-s.out
env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 90 "$T" client 10.0.0.1 7850 > /tmp/fr-c.out 2>&1 || die "client"
wait $sp || die "server"
named=$(grep -c 'fault: an ACCEPT names' /tmp/fr-s.out || true)
refused=$(grep -c 'which we cannot use' /tmp/fr-c.out || true)
[ "$named" -ge 4 ] || die "the fault fired $named times"
[ "$refused" -ge 1 ] || die "the client never met a foreign queue pair"
i0=$(awk '/^round 1 / {print $4}' /tmp/fr-c.out)
i3=$(awk '/^round 3 / {print $4}' /tmp/fr-c.out)
[ -n "$i0" ] && [ -n "$i3" ] || die "rounds not reported"
# (a spare is 8 mappings; the count moves by one or two between rounds)
[ "$i3" -le $((i0 + 4)) ] || die "the client's idle mappings grew from round 1 to 3: $i0 -> $i3 (spares kept)"
echo "foreign: $named foreign ACCEPTs, $refused refused by the client, every byte intact; idle mappings $(awk '/^round/ {printf "%s ", $4}' /tmp/fr-c.out)"
