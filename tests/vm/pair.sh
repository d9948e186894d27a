#!/usr/bin/env bash
# tests/vm/pair.sh [-t SECS] -- COMMAND...: run COMMAND in two guests, hosts
# A (10.1.0.1) and B (10.1.0.2), two kernels joined by a QEMU UDP socket netdev,
# each with rxe0 on its eth0 (tests/vm/run.sh -H).  COMMAND sees VM_HOST=A
# or B.  Output lines are prefixed [A] / [B]; the exit code is A's, or B's if
# A's is 0 (77 if QEMU cannot run).
set -u
T=900
[ "${1:-}" = -t ] && { T=$2; shift 2; }
[ "${1:-}" = -- ] && shift
RUN=$(dirname "$(readlink -f "$0")")/run.sh
port=$((20000 + RANDOM % 20000))
"$RUN" -t "$T" -H "A:$port" -- "$@" > >(sed -u 's/^/[A] /') 2>&1 &
a=$!
sleep 1 # A listens first
"$RUN" -t "$T" -H "B:$port" -- "$@" 2>&1 | sed -u 's/^/[B] /'
b=${PIPESTATUS[0]}
wait $a
a=$?
[ $a = 0 ] && exit "$b"
exit "$a"
