#!/usr/bin/env bash
# Description: clients that publish their offers 60 ms, then 150 ms,
# after their connect() returned (the fault-injection build's
# SHUNT_FAULT_PUBLISH_MS: a client preempted there), to a server with a
# non-blocking listener and to a blocking one: tests/behave/late_offer
# under it, 3 runs each - the non-blocking accept() returns within 15 ms,
# takes the connection plain and says so in the registry, and its client
# stays plain at once (reason 29, server-first), its first byte back
# within its pause + 90 ms; the blocking one waits for a client that
# reserved its slot before the accept, up to 100 ms from that: at 60 ms
# the connection is accelerated, at 150 ms it is plain like the
# non-blocking one's.  All bytes intact.
# Time limit: 60
. "$(dirname "$0")/lib.sh"
for ms in 60 150; do
	faulted_runs 3 late_offer SHUNT_FAULT_PUBLISH_MS=$ms
	echo "late offer, $ms ms: 3 runs; the last: $(tr "\n" ";" < "$WORK/run.log")"
done
