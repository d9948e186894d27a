#!/usr/bin/env bash
# Description: clients that publish their offers 60 ms after their
# connect() returned (the fault-injection build's SHUNT_FAULT_PUBLISH_MS:
# a client preempted there), to a server with a non-blocking listener and
# to a blocking one: tests/behave/late_offer under it, 3 runs - the
# non-blocking accept() returns within 10 ms, the blocking one after at
# most its 20 ms wait, both servers say in the registry that they took
# the connection plain, and each client stays plain at once (reason 29,
# server-first), its first byte back within 150 ms, all bytes intact.
# Time limit: 60
. "$(dirname "$0")/lib.sh"
faulted_runs 3 late_offer SHUNT_FAULT_PUBLISH_MS=60
echo "late offer: 3 runs; the last: $(tr "\n" ";" < "$WORK/run.log")"
