#!/usr/bin/env bash
# bench/setup.sh BEFORE_CHECKOUT [ROUNDS] [OUT_PREFIX] - connection set-up
# under concurrency (issue #13, item 10): `shunt bench-worker
# setup-concurrent THREADS PER` (THREADS client threads, each connect, one
# byte each way, close, in turn, against THREADS server threads in another
# process: connections a second) for 1 x 1000, 8 x 200 and 64 x 50 (or
# $SHAPES), on
# plain TCP, under BEFORE_CHECKOUT's library and under this checkout's,
# alternated ROUNDS times (default 7) so all see the same machine.
# bench/setup.sh --parts [ROUNDS] [OUT_PREFIX] instead splits this
# checkout's cost: TCP; shunt interposing only (SHUNT_DISABLE=1: every
# connection plain by policy); every connection offered (SHUNT_BUSY_SHORT=0:
# no busy-short); and the default (default OUT_PREFIX docs/bench/setup-parts).
# Writes OUT_PREFIX.tsv (shape, variant, median, ratio to TCP's median, the
# runs), OUT_PREFIX.md and OUT_PREFIX.png (default docs/bench/setup).
# BEFORE_CHECKOUT must be built (`git worktree add /tmp/before REV && make -C /tmp/before`).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/shunt-setup.XXXXXX)
trap 'rm -rf "$T"' EXIT
LIB="$ROOT/build/libshunt.so"
# each library its own rendezvous directory: two wire versions never meet
mkdir -m 0700 "$T/before-dir" "$T/after-dir"
if [ "$1" = --parts ]; then
	NAMES=(tcp interpose offered default)
	D="SHUNT_DIR=$T/after-dir LD_PRELOAD=$LIB"
	ENVS=("-u LD_PRELOAD" "$D SHUNT_DISABLE=1" "$D SHUNT_BUSY_SHORT=0" "$D")
	LABEL="checkout $(git -C "$ROOT" rev-parse --short HEAD)"
	DEFAULT_OUT=$ROOT/docs/bench/setup-parts
else
	BEFORE=$(cd "$1" && pwd)
	NAMES=(tcp before after)
	ENVS=("-u LD_PRELOAD" "SHUNT_DIR=$T/before-dir LD_PRELOAD=$BEFORE/build/libshunt.so"
	      "SHUNT_DIR=$T/after-dir LD_PRELOAD=$LIB")
	LABEL="before = $(git -C "$BEFORE" rev-parse --short HEAD), after = $(git -C "$ROOT" rev-parse --short HEAD)"
	DEFAULT_OUT=$ROOT/docs/bench/setup
fi
ROUNDS=${2:-7}
# SHAPES="8 2000;64 250" for other shapes (longer runs: a steady state
# rather than a port's first connections, which are offered until its
# connections are known to be short)
IFS=';' read -r -a SHAPES <<< "${SHAPES:-1 1000;8 200;64 50}"
OUT=${3:-$DEFAULT_OUT}
make -s -C "$ROOT" all
W="$ROOT/build/shunt bench-worker setup-concurrent"
for r in $(seq "$ROUNDS"); do
	for shape in "${SHAPES[@]}"; do
		for i in "${!NAMES[@]}"; do
			# shellcheck disable=SC2086 # ENVS holds words for env
			echo "${shape/ /x} ${NAMES[$i]} $(env ${ENVS[$i]} $W $shape)" >> "$T/runs"
		done
	done
	echo "round $r done" >&2
done
python3 - "$T/runs" "$OUT" "$LABEL" "${NAMES[@]}" <<'EOF'
import statistics, sys
runs, out, label, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
d = {}
for line in open(runs):
    shape, variant, value = line.split()
    d.setdefault((shape, variant), []).append(float(value))
shapes = []
for shape, _ in d:
    if shape not in shapes:
        shapes.append(shape)
with open(out + ".tsv", "w") as t, open(out + ".md", "w") as m:
    t.write("shape\tvariant\tmedian_conn_per_s\tvs_tcp\truns\n")
    m.write(f"Medians of {len(d[(shapes[0], 'tcp')])} alternated runs, connections a second; {label}.\n\n")
    m.write("| threads x connections | " + " | ".join("TCP loopback" if v == "tcp" else v for v in names) +
            " |\n|---|" + "---:|" * len(names) + "\n")
    for s in shapes:
        tcp = statistics.median(d[(s, "tcp")])
        cells = []
        for v in names:
            med = statistics.median(d[(s, v)])
            t.write(f"{s}\t{v}\t{med:.0f}\t{med / tcp:.2f}\t{','.join(f'{x:.0f}' for x in d[(s, v)])}\n")
            cells.append(f"{med:,.0f}" + ("" if v == "tcp" else f" ({med / tcp:.2f}x)"))
        m.write(f"| {s.replace('x', ' x ')} | " + " | ".join(cells) + " |\n")
EOF
. "$ROOT/bench/bars.sh"
bars "$OUT" 'connection set-up under concurrency: median / TCP median (1 = TCP)' 'ratio to TCP loopback' \
	', 1 notitle lw 2' "${NAMES[@]:1}"
cat "$OUT.md"
