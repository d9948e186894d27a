#!/usr/bin/env bash
# Description: a client reaping arenas (it maps a new one) while an answer
# in an offer slot names an idle one of a server it judges gone - the
# fault-injection build's SHUNT_FAULT_PEER_GONE=1, as a live server whose
# liveness file was not made yet was judged.  tests/behave/arena_reap_offer
# under it, 5 runs: every connection accelerated and intact (before the
# fix: cut, "the server's answer names a segment we cannot map").
# Time limit: 120
. "$(dirname "$0")/lib.sh"
faulted_runs 5 arena_reap_offer SHUNT_FAULT_PEER_GONE=1
echo "slot arena: 5 runs, the slot's arena kept while its offer was in flight, every connection accelerated and intact"
