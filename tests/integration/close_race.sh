#!/usr/bin/env bash
# Description: a forking server's parent closes its copy of a connection
# just as the child that served it ends, every close held 20 ms inside
# its look at the shared ring (the fault-injection build's
# SHUNT_FAULT_CLOSE_MS: a thread preempted there): tests/behave/exit_open
# under it, 3 runs - the client reads ECONNRESET where the server left its
# bytes unread, EOF where it read them all, as from TCP.  Before the fix
# both closes saw the other still holding the connection and neither said
# the reset: EOF in every unread round.
# Time limit: 120
. "$(dirname "$0")/lib.sh"
faulted_runs 3 exit_open SHUNT_FAULT_CLOSE_MS=20
echo "close race: 3 runs of exit_open (its race cases 4 times each), every close held 20 ms among the closers"
