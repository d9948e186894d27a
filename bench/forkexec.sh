#!/usr/bin/env bash
# bench/forkexec.sh [ROUNDS] [NAME=LIBRARY...] - what a fork and exec of
# /bin/true costs a server holding N connections accepted close-on-exec
# (N = 1, 10, 100, 250): tests/tools/forkexec, plain TCP and under each
# library (default: this build's), alternated ROUNDS times (default 5),
# medians of medians.  Since the thirty-seventh session the new image
# lets go of the child's share of each such connection (src/shim/exec.c);
# before, every one kept its segment for good.  Prints a markdown table.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
ROUNDS=${1:-5}
shift || true
LIBS=("$@")
[ ${#LIBS[@]} -gt 0 ] || LIBS=("now=$ROOT/$BUILD/libshunt.so")
TOOL="$ROOT/$BUILD/tests/tools/forkexec"
export SHUNT_DIR=$(mktemp -d /tmp/shunt-forkexec.XXXXXX)
out=$(mktemp)
trap 'rm -rf "$SHUNT_DIR" "$out"' EXIT
make -s -C "$ROOT" all tests > /dev/null
for _ in $(seq "$ROUNDS"); do
	for n in 1 10 100 250; do
		echo "TCP $(env -u LD_PRELOAD "$TOOL" "$n" 9)" >> "$out"
		for l in "${LIBS[@]}"; do
			echo "${l%%=*} $(LD_PRELOAD="${l#*=}" "$TOOL" "$n" 9)" >> "$out"
		done
	done
done
python3 - "$out" <<'PY'
import statistics, sys
v, names = {}, []
for line in open(sys.argv[1]):
    name, _, n, ms = line.split()
    v.setdefault((name, int(n)), []).append(float(ms))
    if name not in names:
        names.append(name)
print("| connections held | " + " | ".join(f"{x} (ms)" for x in names) + " | " +
      " | ".join(f"{x}/TCP" for x in names[1:]) + " |")
print("|---:|" + "---:|" * (2 * len(names) - 1))
for n in sorted({k[1] for k in v}):
    m = [statistics.median(v[(x, n)]) for x in names]
    print(f"| {n} | " + " | ".join(f"{x:.2f}" for x in m) + " | " +
          " | ".join(f"{x / m[0]:.2f}x" for x in m[1:]) + " |")
PY
