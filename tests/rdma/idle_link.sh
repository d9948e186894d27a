#!/usr/bin/env bash
# Description: a second link between two processes, made while every slot
# of the first was taken (40 connections held at once, 32 slots a link),
# retires once idle: one side asks (wire.h SHUNT_CDC_F_LINK), the other
# agrees, both free its queue pair and rings.  Each process's mappings
# with the 40 open and 5 s after they closed (tests/tools/idlelink): the
# idle count is below the peak, and a second round of 40 (a new second
# link) comes back to the same idle count - before, the second link stayed
# for the process's life (the leak test's flaky +8 mappings and +16 MiB
# under load over RDMA).
set -eu
. "$(dirname "$0")/lib.sh"
T=$BUILD/tests/tools/idlelink
die() { echo "FAIL: $*"; grep -hv "connect fd\|accept fd\|handshake fd" /tmp/il-s.out /tmp/il-c.out; exit 1; }
: > /tmp/il-s.out # a stale "listening" must not start the client
env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 90 "$T" server 10.0.0.1 7840 > /tmp/il-s.out 2>&1 &
sp=$!
listening /tmp/il-s.out
env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 90 "$T" client 10.0.0.1 7840 > /tmp/il-c.out 2>&1 || die "client"
wait $sp || die "server"
for f in /tmp/il-s.out /tmp/il-c.out; do
	grep -q 'rdma: idle link to qp [0-9]* retires' $f || die "$f: no link retired"
	grep -q 'stays (the peer uses it)' $f && die "$f: a retire was refused on idle links"
	read -r p0 i0 <<< "$(awk '/^round 0/ {print $4, $6}' $f)"
	read -r p1 i1 <<< "$(awk '/^round 1/ {print $4, $6}' $f)"
	[ -n "$p0" ] && [ -n "$p1" ] || die "$f: rounds not reported"
	[ "$i0" -lt "$p0" ] || die "$f: round 0: $p0 mappings with 40 open, $i0 idle: the second link stayed"
	[ "$i1" -lt "$p1" ] || die "$f: round 1: $p1 mappings with 40 open, $i1 idle: the second link stayed"
	[ "$i1" -le "$i0" ] || die "$f: idle mappings grew from round 0 to 1: $i0 -> $i1"
	echo "idle_link: $(basename $f): mappings $p0 -> $i0, $p1 -> $i1"
done
