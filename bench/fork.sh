#!/usr/bin/env bash
# bench/fork.sh [ROUNDS] [OUT_PREFIX] [NAME=LIBRARY...] - what a fork costs
# a process with nothing but shunt's library in it (`shunt bench-worker
# fork-exit 2000`: children that exit() at once, each waited for): wall
# time a fork, the children's CPU time and their page faults, without the
# library and under each given one (default: this build's), alternated
# ROUNDS times (default 5), medians.  The floor under every forking
# server's connection (docs/architecture.md, "Known limits").  Writes
# OUT_PREFIX.md, .tsv and .png (default docs/bench/fork).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
ROUNDS=${1:-5}
OUT=${2:-$ROOT/docs/bench/fork}
shift 2 || shift $# || true
LIBS=("$@")
[ ${#LIBS[@]} -gt 0 ] || LIBS=("now=$ROOT/$BUILD/libshunt.so")
export SHUNT_DIR; SHUNT_DIR=$(mktemp -d /tmp/shunt-fork.XXXXXX)
runs=$(mktemp)
trap 'rm -rf "$SHUNT_DIR" "$runs"' EXIT
make -s -C "$ROOT" all > /dev/null
for _ in $(seq "$ROUNDS"); do
	echo "no-library $(env -u LD_PRELOAD "$ROOT/$BUILD/shunt" bench-worker fork-exit 2000)" >> "$runs"
	for l in "${LIBS[@]}"; do
		echo "${l%%=*} $(LD_PRELOAD="${l#*=}" "$ROOT/$BUILD/shunt" bench-worker fork-exit 2000)" >> "$runs"
	done
done
python3 - "$runs" "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD)" <<'PY'
import statistics, sys
runs, out, rev = sys.argv[1:4]
v, names = {}, []
for line in open(runs):
    name, wall, cpu, flt = line.split()
    v.setdefault(name, []).append((float(wall), float(cpu), float(flt)))
    if name not in names:
        names.append(name)
med = {n: [statistics.median(x[i] for x in v[n]) for i in range(3)] for n in names}
with open(out + ".tsv", "w") as t, open(out + ".md", "w") as m:
    t.write("measure\tvariant\tratio_to_no_library\tmedian_us\tmedian_child_minflt\n")
    m.write(f"Medians of {len(v[names[0]])} alternated runs ({rev}) of 2,000 forks whose child exit()s at once:\n\n")
    m.write("| variant | wall a fork | child's CPU | child's page faults |\n|---|---:|---:|---:|\n")
    base = med[names[0]]
    for n in names:
        w, c, f = med[n]
        t.write(f"wall a fork\t{n}\t{w / base[0]:.2f}\t{w:.1f}\t{f:.2f}\n")
        t.write(f"child's CPU\t{n}\t{c / base[1]:.2f}\t{c:.1f}\t{f:.2f}\n")
        m.write(f"| {n} | {w:.0f} us ({w / base[0]:.2f}x) | "
                f"{c:.0f} us ({c / base[1]:.2f}x) | {f:.1f} (+{f - base[2]:.1f}) |\n")
PY
. "$ROOT/bench/bars.sh"
# shellcheck disable=SC2046 # the variants, one word each
bars "$OUT" 'A fork whose child exit()s at once' 'us' '' $(awk '!s[$1]++ {print $1}' "$runs")
cat "$OUT.md"
