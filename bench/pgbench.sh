#!/usr/bin/env bash
# bench/pgbench.sh [ROUNDS] [OUT_PREFIX] - PostgreSQL's pgbench, select-only
# (-S), against an unmodified server on 127.0.0.1: plain TCP, then server
# and pgbench both under shunt, alternated ROUNDS times (default 3) for 1,
# 2 and 8 clients (-j: at most 2 threads) of SECONDS each (default 4).
# PostgreSQL's postmaster accepts each connection and forks a backend for
# it, which waits for its queries in epoll: the case where connections of
# one arena are waited on by different processes (docs/architecture.md,
# "Known limits": the arena's doorbell wakes them all).  Medians of
# transactions a second and their ratio to TCP's in the same round; writes
# OUT_PREFIX.tsv, .md and .png (default docs/bench/pgbench).  Needs the
# postgresql package and root (the server runs as the postgres user).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-3}
OUT=${2:-$ROOT/docs/bench/pgbench}
SECONDS_EACH=${SECONDS_EACH:-4}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PGBIN/postgres" ] || { echo "pgbench.sh: no PostgreSQL (apt-get install postgresql)" >&2; exit 1; }
id postgres > /dev/null 2>&1 || { echo "pgbench.sh: no postgres user" >&2; exit 1; }
make -s -C "$ROOT" all
T=$(mktemp -d /tmp/shunt-pgbench.XXXXXX)
chmod 755 "$T"
mkdir -m 0700 "$T/dir" "$T/data" "$T/sock"
cp "$ROOT/build/libshunt.so" "$T/libshunt.so" # readable by the postgres user
chmod 755 "$T/libshunt.so"
chown postgres "$T/dir" "$T/data" "$T/sock"
P=$((20000 + RANDOM % 10000))
as_pg() { su postgres -s /bin/bash -c "$*"; }
stop() { as_pg "$PGBIN/pg_ctl -D $T/data -m immediate stop" > /dev/null 2>&1 || true; }
trap 'stop; rm -rf "$T"' EXIT
as_pg "$PGBIN/initdb -D $T/data -A trust" > /dev/null
SH="SHUNT_DIR=$T/dir LD_PRELOAD=$T/libshunt.so"
start() { # env prefix for the server
	as_pg "$1 $PGBIN/pg_ctl -D $T/data -w -l $T/data/log -o '-c listen_addresses=127.0.0.1 -p $P -k $T/sock -c max_connections=50'  start" > /dev/null
}
start ""
as_pg "$PGBIN/pgbench -h 127.0.0.1 -p $P -i -s 2 -q postgres" > /dev/null 2>&1
stop
: > "$T/runs"
for r in $(seq "$ROUNDS"); do
	for v in tcp shunt; do
		pre=$([ $v = shunt ] && echo "$SH" || true)
		start "$pre"
		for c in 1 2 8; do
			j=$((c < 2 ? c : 2))
			tps=$(as_pg "$pre $PGBIN/pgbench -h 127.0.0.1 -p $P -c $c -j $j -T $SECONDS_EACH -S postgres" 2>&1 |
				awk '/^tps/{print $3}')
			[ -n "$tps" ] || { echo "pgbench.sh: round $r, $v, $c clients: no result" >&2; exit 1; }
			echo "$c $v $tps $r" >> "$T/runs"
		done
		stop
	done
	echo "round $r done" >&2
done
python3 - "$T/runs" "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD)" <<'PY'
import statistics, sys
runs, out, rev = sys.argv[1:4]
d = {}
for line in open(runs):
    c, v, tps, r = line.split()
    d.setdefault((c, r), {})[v] = float(tps)
with open(out + ".tsv", "w") as t, open(out + ".md", "w") as m:
    t.write("clients\tvariant\tmedian_tps\tratio_to_tcp\n")
    m.write(f"pgbench -S (select-only), server and pgbench on one host, medians of "
            f"{len({r for _, r in d})} alternated rounds ({rev}): transactions a second "
            "(ratio to TCP's in the same round).\n\n| clients | tcp | shunt |\n|---|---:|---:|\n")
    for c in sorted({c for c, _ in d}, key=int):
        rounds = [x for (cc, _), x in d.items() if cc == c]
        tcp = statistics.median(x["tcp"] for x in rounds)
        sh = statistics.median(x["shunt"] for x in rounds)
        ratio = statistics.median(x["shunt"] / x["tcp"] for x in rounds)
        t.write(f"{c}\ttcp\t{tcp:.0f}\t1.00\n{c}\tshunt\t{sh:.0f}\t{ratio:.2f}\n")
        m.write(f"| {c} | {tcp:,.0f} | {sh:,.0f} ({ratio:.2f}x) |\n")
PY
# the tsv's value column for bars is the 4th: the ratio
. "$ROOT/bench/bars.sh"
bars "$OUT" 'pgbench -S: transactions a second against TCP (1 = TCP)' 'ratio to TCP' ', 1 notitle lw 2' tcp shunt
cat "$OUT.md"
