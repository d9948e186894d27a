#!/usr/bin/env bash
# bench/floor.sh [ROUNDS] [OUT_PREFIX] - what a short connection costs, in
# CPU time, against the kernel's floor (issue #13, item 10): `shunt
# bench-worker setup-floor THREADS PER byte|none` (setup-concurrent's
# connect, one byte each way, close; or with no byte: the client waits for
# the server's close) prints connections a second and both processes' CPU
# time a connection.  Variants, alternated ROUNDS times (default 5) for 8 x
# 2,000 and 64 x 250 (or $SHAPES): TCP with its bytes; TCP without them
# (the floor: an accelerated connection's bytes skip the socket, its TCP
# set-up and close are made all the same); shunt with every connection
# offered (SHUNT_BUSY_SHORT=0); shunt's default.  Medians; writes
# OUT_PREFIX.tsv, .md and .png (default docs/bench/floor).  CLIENT=poll
# makes the clients non-blocking, with poll() before each step; CLIENT=epoll
# the same with each thread's epoll set (added for room, modified for bytes);
# CLIENT=loop one event loop's set with every client thread in it (twice as
# many connections in flight as threads, THREADS x PER in all), and
# CLIENT=loop-seq the same against a server of one thread (one connection
# at a time: it waits on the loop's next request).  CLIENT=fork: a server
# that forks a process for each connection, which serves it and exit()s
# (PostgreSQL's backends, inetd's), one accepting thread; its second
# variant (fork-none) the child's close alone; CLIENT=fork-keep the same
# with a child that keeps the listener open (Python's ForkingMixIn).
# PLAIN=1 and OLD=DIR add variants (below).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/shunt-floor.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -m 0700 "$T/dir"
D="SHUNT_DIR=$T/dir LD_PRELOAD=$ROOT/build/libshunt.so"
NAMES=(tcp tcp-no-bytes offered default)
ENVS=("-u LD_PRELOAD" "-u LD_PRELOAD" "$D SHUNT_BUSY_SHORT=0" "$D")
# CLIENT=poll: the clients as an event loop's (non-blocking sockets, poll()
# for each turn) instead of blocking calls
K=${CLIENT:-byte}
KINDS=("$K" "$(case $K in fork*) echo fork-none ;; *) echo none ;; esac)" "$K" "$K")
# PLAIN=1: one more variant, "plain", every connection kept plain under
# shunt (SHUNT_PORTS names another port: interposition's own cost - a
# server's clients without shunt, or from another host without the agent)
if [ -n "${PLAIN:-}" ]; then
	NAMES+=(plain)
	ENVS+=("$D SHUNT_PORTS=1")
	KINDS+=("$K")
fi
# OLD=DIR: one more variant, "old", every connection offered through the
# library of an older build in DIR (DIR/libshunt.so): a change's effect
# measured in the same run (with PLAIN=1, "old-plain" too)
if [ -n "${OLD:-}" ]; then
	[ -f "$OLD/libshunt.so" ] || { echo "floor.sh: no $OLD/libshunt.so" >&2; exit 1; }
	NAMES+=(old)
	ENVS+=("SHUNT_DIR=$T/dir LD_PRELOAD=$OLD/libshunt.so SHUNT_BUSY_SHORT=0")
	KINDS+=("$K")
	if [ -n "${PLAIN:-}" ]; then
		NAMES+=(old-plain)
		ENVS+=("SHUNT_DIR=$T/dir LD_PRELOAD=$OLD/libshunt.so SHUNT_PORTS=1")
		KINDS+=("$K")
	fi
fi
ROUNDS=${1:-5}
OUT=${2:-$ROOT/docs/bench/floor}
IFS=';' read -r -a SHAPES <<< "${SHAPES:-8 2000;64 250}"
make -s -C "$ROOT" all
for r in $(seq "$ROUNDS"); do
	for shape in "${SHAPES[@]}"; do
		for i in "${!NAMES[@]}"; do
			# shellcheck disable=SC2086 # ENVS holds words for env
			out=$(env ${ENVS[$i]} "$ROOT/build/shunt" bench-worker setup-floor $shape "${KINDS[$i]}" 2> "$T/err") || true
			if [ "$(wc -w <<< "$out")" != 2 ] || [ -s "$T/err" ]; then
				echo "floor.sh: round $r, ${shape/ /x} ${NAMES[$i]} failed: '$out'" >&2
				cat "$T/err" >&2
				exit 1
			fi
			echo "${shape/ /x} ${NAMES[$i]} $out" >> "$T/runs"
		done
	done
	echo "round $r done" >&2
done
python3 - "$T/runs" "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD)" "${NAMES[@]}" <<'PY'
import statistics, sys
runs, out, rev, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
d = {}
shapes = []
for line in open(runs):
    shape, v, rate, cpu = line.split()
    if shape not in shapes:
        shapes.append(shape)
    d.setdefault((shape, v), []).append((float(rate), float(cpu)))
with open(out + ".tsv", "w") as t, open(out + ".md", "w") as m:
    t.write("shape\tvariant\tmedian_conn_per_s\tmedian_cpu_us_per_conn\tcpu_vs_tcp\n")
    m.write(f"Medians of {len(d[(shapes[0], 'tcp')])} alternated runs ({rev}): connections a second, "
            "and both processes' CPU time a connection (ratio to TCP's).\n\n")
    m.write("| threads x connections | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names) + "\n")
    for s in shapes:
        tcp = statistics.median(c for _, c in d[(s, "tcp")])
        cells = []
        for v in names:
            rate = statistics.median(r for r, _ in d[(s, v)])
            cpu = statistics.median(c for _, c in d[(s, v)])
            t.write(f"{s}\t{v}\t{rate:.0f}\t{cpu:.1f}\t{cpu / tcp:.2f}\n")
            cells.append(f"{rate:,.0f}/s, {cpu:.1f} us ({cpu / tcp:.2f}x)")
        m.write(f"| {s.replace('x', ' x ')} | " + " | ".join(cells) + " |\n")
PY
. "$ROOT/bench/bars.sh"
bars "$OUT" 'CPU time a short connection costs (both processes)' 'us a connection' '' "${NAMES[@]}"
cat "$OUT.md"
