#!/usr/bin/env bash
# bench/stdio.sh [ROUNDS] - what shunt's C stdio wrappers (src/shim/stdio.c)
# cost a program that uses stdio on files only: tests/tools/stdioloop
# (fwrite, putc, fprintf to /dev/null, fgetc from /dev/zero; 2 million
# each) plain and under shunt, alternated ROUNDS times (default 7) in one
# run.  Prints a markdown table of medians, nanoseconds per call, and the
# ratio shunt/plain.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
LOOP="$ROOT/$BUILD/tests/tools/stdioloop"
export SHUNT_DIR=$(mktemp -d /tmp/shunt-stdio.XXXXXX)
trap 'rm -rf "$SHUNT_DIR"' EXIT
make -s -C "$ROOT" all tests > /dev/null
out=$(mktemp)
for _ in $(seq "${1:-7}"); do
	echo "plain $(env -u LD_PRELOAD "$LOOP")" >> "$out"
	echo "shunt $(LD_PRELOAD="$ROOT/$BUILD/libshunt.so" "$LOOP")" >> "$out"
done
python3 - "$out" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    w = line.split()
    for k in range(1, len(w), 2):
        v.setdefault((w[0], w[k]), []).append(float(w[k + 1]))
print("| call | plain | under shunt | ratio |")
print("|---|---:|---:|---:|")
for call in ("fwrite", "putc", "fprintf", "fgetc"):
    p, s = statistics.median(v[("plain", call)]), statistics.median(v[("shunt", call)])
    print(f"| {call} | {p:.1f} ns | {s:.1f} ns | {s / p:.2f}x |")
PY
rm -f "$out"
