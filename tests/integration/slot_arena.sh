#!/usr/bin/env bash
# Description: a client reaping arenas (it maps a new one) while an answer
# in an offer slot names an idle one of a server it judges gone - the
# fault-injection build's SHUNT_FAULT_PEER_GONE=1, as a live server whose
# liveness file was not made yet was judged.  tests/behave/arena_reap_offer
# under it, 5 runs: every connection accelerated and intact (before the
# fix: cut, "the server's answer names a segment we cannot map").
# Time limit: 120
. "$(dirname "$0")/lib.sh"
FAULTS="$ROOT/$BUILD/libshunt-faults.so"
PROG="$ROOT/$BUILD/tests/behave/arena_reap_offer"
[ -f "$FAULTS" ] && [ -x "$PROG" ] || die "missing $FAULTS or $PROG (make tests)"
for i in 1 2 3 4 5; do
	env LD_PRELOAD="$FAULTS" SHUNT_FAULT_PEER_GONE=1 SHUNT_EXPECT=shm SHUNT_BUSY_SHORT=0 "$PROG" \
		> "$WORK/run.log" 2>&1 || die "run $i: $(cat "$WORK/run.log")"
done
echo "slot arena: 5 runs, the slot's arena kept while its offer was in flight, every connection accelerated and intact"
