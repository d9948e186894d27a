#!/usr/bin/env bash
# bench/wake.sh BEFORE_LIB [ROUNDS] - what a wake-up costs through poll(),
# epoll_wait() and a blocking recv() (tests/tools/wake: a 64-byte
# ping-pong, both ends sleeping for every message: SHUNT_SPIN_US=0), for
# the library of an older checkout and this one, alternated five times in
# one run; TCP loopback in the same run.  Prints a markdown table of
# medians (us per round trip).
#   bench/wake.sh /tmp/before/build/libshunt.so
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
BEFORE=$1 ROUNDS=${2:-20000}
AFTER="$ROOT/$BUILD/libshunt.so"
WAKE="$ROOT/$BUILD/tests/tools/wake"
export SHUNT_DIR=$(mktemp -d /tmp/shunt-wake.XXXXXX)
trap 'rm -rf "$SHUNT_DIR"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
declare -A r
for _ in 1 2 3 4 5; do
	for how in poll epoll block; do
		r[$how,tcp]+="$(env -u LD_PRELOAD "$WAKE" $how "$ROUNDS") "
		r[$how,before]+="$(SHUNT_SPIN_US=0 LD_PRELOAD="$BEFORE" "$WAKE" $how "$ROUNDS") "
		r[$how,after]+="$(SHUNT_SPIN_US=0 LD_PRELOAD="$AFTER" "$WAKE" $how "$ROUNDS") "
	done
done
echo "| wait | TCP loopback | before | after |"
echo "|---|---:|---:|---:|"
for how in poll epoll block; do
	printf '| %s | %s us | %s us | %s us |\n' "$how" \
		"$(tr ' ' '\n' <<< "${r[$how,tcp]}" | grep . | median)" \
		"$(tr ' ' '\n' <<< "${r[$how,before]}" | grep . | median)" \
		"$(tr ' ' '\n' <<< "${r[$how,after]}" | grep . | median)"
done
