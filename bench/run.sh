#!/usr/bin/env bash
# bench/run.sh - the whole benchmark: `shunt bench` (latency, throughput,
# setup; shunt modes vs TCP loopback, unix socket, raw shared memory), then
# redis-benchmark, then the plot.  Results: docs/bench/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
make -s
OUT=docs/bench
mkdir -p "$OUT"
build/shunt bench --out "$OUT" "$@"
bench/redis.sh "$OUT/results.tsv"
# keep the markdown table in step with the tsv
{ head -n 2 "$OUT/results.md"; echo; echo "| test | variant | value | unit | vs TCP loopback |"; echo "|---|---|---:|---|---:|";
  tail -n +2 "$OUT/results.tsv" | awk -F'\t' '{printf "| %s | %s | %.2f | %s | %.2fx |\n", $1, $2, $3, $4, $5}'; } > "$OUT/results.md.new"
mv "$OUT/results.md.new" "$OUT/results.md"
if command -v gnuplot >/dev/null; then
	# The plot groups rows by test; the raw-shm rows of throughput are memcpy.
	awk -F'\t' 'NR==1 || $2 != "tcp-loopback"' "$OUT/results.tsv" > "$OUT/plot.tsv"
	gnuplot -c bench/plot.gp "$OUT/plot.tsv" "$OUT/results.png"
	rm -f "$OUT/plot.tsv"
fi
cat "$OUT/results.md"
