#!/usr/bin/env bash
# bench/churn.sh - 100,000 short connections, one after another (issue #13,
# item 9: RSS, descriptors and the rendezvous directory stay flat): plain
# TCP, then shunt with one client thread (every connection accelerated)
# and with four (short connections under load: most plain, busy-short),
# in one run.  Prints a markdown table: each process's RSS and descriptors
# and the directory's entries after 10,000 and after 100,000.
#   TOTAL=100000 BUILD=build bash bench/churn.sh
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
TOTAL=${TOTAL:-100000}
CHURN="$ROOT/$BUILD/tests/tools/churn"
[ -x "$CHURN" ] || { echo "build first: make BUILD=$BUILD tests"; exit 1; }
field() { sed -n "s/.* $2=\([0-9-]*\).*/\1/p" <<< " $1"; }
row() { # label line
	printf '| %s | %s | %s KiB | %s KiB | %s | %s | %s |\n' "$1" "$(field "$2" conns)" \
		"$(field "$2" client_rss_kb)" "$(field "$2" server_rss_kb)" "$(field "$2" client_fds)" \
		"$(field "$2" server_fds)" "$(field "$2" dir)"
}
one() { # label threads preload
	local dir out
	dir=$(mktemp -d /tmp/shunt-churn.XXXXXX)
	out=$(SHUNT_DIR="$dir" LD_PRELOAD="$3" "$CHURN" "$TOTAL" "$2")
	rm -rf "$dir"
	row "$1" "$(head -1 <<< "$out")"
	row "$1" "$(tail -1 <<< "$out")"
}
echo "$TOTAL connections, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| run | connections | client RSS | server RSS | client fds | server fds | directory entries |"
echo "|---|---:|---:|---:|---:|---:|---:|"
one "TCP, 1 thread" 1 ""
one "shunt, 1 thread" 1 "$ROOT/$BUILD/libshunt.so"
one "shunt, 4 threads" 4 "$ROOT/$BUILD/libshunt.so"
