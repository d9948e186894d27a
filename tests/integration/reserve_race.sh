#!/usr/bin/env bash
# Description: clients that pause right after taking an offer slot (the
# fault-injection build's SHUNT_FAULT_RESERVE_US: a thread preempted
# there) while others scan past their slots, on a new registry:
# tests/behave/reserve_burst under it, 3 runs - every connection intact,
# none cut, nearly all accelerated.  Before the fix a slot taken a moment
# ago looked 30 s old (its time not written yet), was reaped and taken
# twice: cut connections in the first run.
# Time limit: 180
. "$(dirname "$0")/lib.sh"
faulted_runs 3 reserve_burst SHUNT_FAULT_RESERVE_US=300
echo "reserve race: 3 runs with a pause after each reservation, $(tail -1 "$WORK/run.log")"
