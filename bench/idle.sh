#!/usr/bin/env bash
# bench/idle.sh - what N idle connections cost (issue #13, item 9): one
# server process accepts N, one client process makes N, both under
# RLIMIT_NOFILE LIMIT; each reports its open descriptors, its VmRSS and
# how many of its connections are accelerated.  Plain TCP, then both ends
# under shunt, in the same run.  Prints a markdown table.
#   N=10000 LIMIT=20000 BUILD=build bash bench/idle.sh
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
N=${N:-10000}
LIMIT=${LIMIT:-20000}
IDLE="$ROOT/$BUILD/tests/tools/idle"
SHUNT="$ROOT/$BUILD/shunt"
WORK=$(mktemp -d /tmp/shunt-idle.XXXXXX)
export SHUNT_DIR="$WORK/dir"
trap 'rc=$?; exec 3>&- 4>&- 2>/dev/null; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; exit $rc' EXIT
[ -x "$IDLE" ] || { echo "build first: make BUILD=$BUILD tests"; exit 1; }

one() { # MODE -> "server-line|client-line"
	local mode=$1 port run=()
	[ "$mode" = shunt ] && run=("$SHUNT" run --)
	mkfifo "$WORK/in.$mode.s" "$WORK/in.$mode.c"
	(ulimit -n "$LIMIT"; exec "${run[@]}" "$IDLE" server 0 "$N" < "$WORK/in.$mode.s" > "$WORK/s.$mode" 2>&1) &
	exec 3> "$WORK/in.$mode.s"
	for _ in $(seq 200); do grep -q listening "$WORK/s.$mode" && break; sleep 0.05; done
	port=$(sed -n 's/^listening //p' "$WORK/s.$mode")
	(ulimit -n "$LIMIT"; exec "${run[@]}" "$IDLE" client "$port" "$N" < "$WORK/in.$mode.c" > "$WORK/c.$mode" 2>&1) &
	exec 4> "$WORK/in.$mode.c"
	for _ in $(seq 1200); do
		grep -q role= "$WORK/s.$mode" && grep -q role= "$WORK/c.$mode" && break
		sleep 0.1
	done
	grep -h role= "$WORK/s.$mode" "$WORK/c.$mode" | tr '\n' '|'
	exec 3>&- 4>&-
	wait
}

field() { sed -n "s/.* $2=\([0-9-]*\).*/\1/p" <<< " $1"; }
errtxt() { local e; e=$(field "$1" error); [ "$e" = 0 ] && return; case $e in 24) echo " (EMFILE)";; *) echo " (errno $e)";; esac; }
tcp=$(one tcp)
shm=$(one shunt)
echo "N=$N connections, RLIMIT_NOFILE $LIMIT, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| process | TCP: open | TCP: fds | TCP: RSS | shunt: open | shunt: fds | shunt: RSS | shunt: accelerated |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for role in server client; do
	t=$(tr '|' '\n' <<< "$tcp" | grep "role=$role" || true)
	s=$(tr '|' '\n' <<< "$shm" | grep "role=$role" || true)
	[ -n "$t" ] && [ -n "$s" ] || { echo "FAIL: $role did not report: $(cat "$WORK"/[sc].*)"; exit 1; }
	tf=$(field "$t" fds); tr_=$(field "$t" rss_kb); sf=$(field "$s" fds); sr=$(field "$s" rss_kb)
	printf '| %s | %s%s | %s | %.1f MiB | %s%s | %s | %.1f MiB | %s |\n' "$role" \
		"$(field "$t" conns)" "$(errtxt "$t")" "$tf" "$(echo "$tr_ / 1024" | bc -l)" \
		"$(field "$s" conns)" "$(errtxt "$s")" "$sf" "$(echo "$sr / 1024" | bc -l)" "$(field "$s" accel)"
done
