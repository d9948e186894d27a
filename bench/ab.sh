#!/usr/bin/env bash
# bench/ab.sh ROUNDS "THREADS PER" KIND NAME=ENV... - a set-up shape of
# `shunt bench-worker setup-floor` (KIND: byte, poll, epoll, loop,
# loop-seq, fork...) run plain (TCP) and under each variant, alternated
# ROUNDS times; a variant is a name and the environment it adds (another
# library: old=LD_PRELOAD=/path/to/libshunt.so; a setting:
# offered=SHUNT_BUSY_SHORT=0; the library built here: new=).  Prints the
# medians of connections a second and of CPU time a connection, and the
# median of each round's ratio to TCP's CPU time in the same round.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 4 ] || { echo "usage: bench/ab.sh ROUNDS 'THREADS PER' KIND NAME=ENV..." >&2; exit 2; }
N=$1 SHAPE=$2 KIND=$3
shift 3
T=$(mktemp -d /tmp/shunt-ab.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -m 0700 "$T/dir"
: > "$T/runs"
make -s -C "$ROOT" all
for _ in $(seq "$N"); do
	# shellcheck disable=SC2086 # SHAPE holds two words
	echo "tcp $(env -u LD_PRELOAD "$ROOT/build/shunt" bench-worker setup-floor $SHAPE "$KIND")" >> "$T/runs"
	for v in "$@"; do
		# shellcheck disable=SC2086 # the variant's words for env
		echo "${v%%=*} $(env SHUNT_DIR="$T/dir" LD_PRELOAD="$ROOT/build/libshunt.so" ${v#*=} \
			"$ROOT/build/shunt" bench-worker setup-floor $SHAPE "$KIND")" >> "$T/runs"
	done
done
python3 - "$T/runs" <<'PY'
import statistics, sys
d, order = {}, []
for line in open(sys.argv[1]):
    n, rate, cpu = line.split()
    if n not in d:
        order.append(n)
    d.setdefault(n, []).append((float(rate), float(cpu)))
tcp = d["tcp"]
for n in order:
    ratios = [c / t[1] for (_, c), t in zip(d[n], tcp)]
    print(f"{n:12s} {statistics.median(r for r, _ in d[n]):8.0f}/s {statistics.median(c for _, c in d[n]):8.1f} us "
          f"{statistics.median(ratios):.3f}x TCP's CPU")
PY
