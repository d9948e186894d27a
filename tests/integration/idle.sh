#!/usr/bin/env bash
# Description: 10,000 idle connections between two processes, each under
# RLIMIT_NOFILE 20,000 (issue #13, item 9) - what TCP fits, shunt fits:
# both processes open all 10,000 (bench/idle.sh, plain TCP and shunt in one
# run).  Before, shunt's four descriptors a connection stopped both at
# 4,958 with EMFILE from the program's own accept() and socket(); now a
# connection costs no descriptor of shunt's (its socket is the program's
# own number; an arena's three serve 32 connections), so under 20,000 all
# 10,000 stay accelerated; at a limit, idle connections move to TCP and
# give theirs back (reason `descriptors`).  The same at Debian's default
# limit, 1,024.
. "$(dirname "$0")/lib.sh"

check() { # N LIMIT ACCELERATED_AT_LEAST
	local out row
	out=$(N=$1 LIMIT=$2 BUILD="$BUILD" bash "$ROOT/bench/idle.sh" 2>&1) || die "bench/idle.sh: $out"
	for role in server client; do
		row=$(grep "^| $role |" <<< "$out") || die "no $role row: $out"
		# | role | TCP open | TCP fds | TCP RSS | shunt open | shunt fds | shunt RSS | accelerated |
		IFS='|' read -r _ _ topen _ _ sopen sfds _ accel _ <<< "$row"
		topen=${topen// /}; sopen=${sopen// /}; sfds=${sfds// /}; accel=${accel// /}
		[ "$topen" = "$1" ] || die "$role: TCP held $topen of $1 under $2: the machine, not shunt: $out"
		[ "$sopen" = "$1" ] || die "$role: shunt held $sopen of $1 where TCP held all (limit $2): $out"
		[ "$sfds" -le "$2" ] || die "$role: $sfds descriptors over the limit $2?"
		[ "$accel" -ge "$3" ] || die "$role: $accel of $1 accelerated under $2, not $3: $out"
		echo "  $1 connections under RLIMIT_NOFILE $2: $role holds all (TCP too), $accel accelerated, $sfds descriptors"
	done
}
check 10000 20000 10000
check 1000 1024 0
