#!/usr/bin/env bash
# bench/compare.sh BEFORE_CHECKOUT [OUT_PREFIX] - the cost of a change: the
# whole benchmark (`shunt bench` + redis) of an older checkout and of this
# one, alternating twice (before, after, before, after) so that both see
# the same machine; each run's ratios are to its own TCP baseline.  Writes
# OUT_PREFIX.tsv (test, variant, before/after ratio to TCP and absolute
# value, each the mean of two runs), OUT_PREFIX.md and OUT_PREFIX.png.
# BEFORE_CHECKOUT must be built (e.g. `git worktree add /tmp/before REV && make -C /tmp/before`).
# bench/compare.sh --render OUT_PREFIX redraws OUT_PREFIX.png from its tsv.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
plot() {
	command -v gnuplot > /dev/null || return 0
	gnuplot -e "set terminal pngcairo size 1000,560; set output '$1.png'; set datafile separator '\t';
		set title 'after / before, absolute values, log scale (us: lower is better; GB/s, req/s: higher); 1 = no change';
		set style data histogram; set style fill solid 0.8; set xtics rotate by -40 font ',9';
		set bmargin 9; set rmargin 8; set logscale y; set yrange [0.01:100]; set grid ytics; set key off;
		plot '$1.tsv' using 8:xtic(stringcolumn(1).' '.stringcolumn(2))"
}
if [ "${1:-}" = --render ]; then
	plot "$2"
	exit
fi
BEFORE=$(cd "$1" && pwd)
OUT=${2:-$ROOT/docs/bench/compare}
T=$(mktemp -d /tmp/shunt-compare.XXXXXX)
trap 'rm -rf "$T"' EXIT
make -s -C "$ROOT"
for i in 1 2; do
	for v in before after; do
		d=$ROOT; [ $v = before ] && d=$BEFORE
		mkdir -p "$T/$v$i"
		(cd "$d" && build/shunt bench --out "$T/$v$i" > "$T/$v$i/log" 2>&1 &&
			bash "$ROOT/bench/redis.sh" "$T/$v$i/results.tsv" >> "$T/$v$i/log" 2>&1)
		echo "$v run $i done"
	done
done
awk -F'\t' 'FNR == 1 { split(FILENAME, p, "/"); run = p[length(p) - 1]; v = substr(run, 1, length(run) - 1); next }
	$2 ~ /^shunt/ { k = $1 "\t" $2; if (!(k in seen)) { seen[k] = 1; order[++n] = k; unit[k] = $4 }
		r[k, v] += $5 / 2; a[k, v] += $3 / 2 }
	END { print "test\tvariant\tbefore_vs_tcp\tafter_vs_tcp\tbefore\tafter\tunit\tafter/before";
		for (i = 1; i <= n; i++) { k = order[i]
			printf "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%.3f\n", k, r[k, "before"], r[k, "after"],
			       a[k, "before"], a[k, "after"], unit[k], a[k, "after"] / a[k, "before"] } }' \
	"$T"/before1/results.tsv "$T"/before2/results.tsv "$T"/after1/results.tsv "$T"/after2/results.tsv > "$OUT.tsv"
{ echo "Measured by bench/compare.sh on $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'): before = $(git -C "$BEFORE" rev-parse --short HEAD), after = $(git -C "$ROOT" rev-parse --short HEAD); means of two alternating runs."
  echo; echo "| test | variant | before vs TCP | after vs TCP | before | after | unit | after / before |"
  echo "|---|---|---:|---:|---:|---:|---|---:|"
  tail -n +2 "$OUT.tsv" | awk -F'\t' '{ printf "| %s | %s | %sx | %sx | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }'; } > "$OUT.md"
plot "$OUT"
cat "$OUT.md"
