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
if [ "${1:-}" != "--render" ]; then # --render: only redo the table and plot
	build/shunt bench --out "$OUT" "$@"
	bench/redis.sh "$OUT/results.tsv"
fi
# keep the markdown table in step with the tsv
{ head -n 2 "$OUT/results.md"; echo; echo "| test | variant | value | unit | vs TCP loopback |"; echo "|---|---|---:|---|---:|";
  tail -n +2 "$OUT/results.tsv" | awk -F'\t' '{printf "| %s | %s | %.2f | %s | %.2fx |\n", $1, $2, $3, $4, $5}'; } > "$OUT/results.md.new"
mv "$OUT/results.md.new" "$OUT/results.md"
if command -v gnuplot >/dev/null; then
	# One row per test, one column per variant (ratio to TCP in that run);
	# the raw-shm column of the stream test is memcpy bandwidth.
	awk -F'\t' 'BEGIN { n = split("unix-socket shunt-no-spin shunt-default shunt-busy-poll raw-shm", v, " ") }
		NR > 1 { r[$1, $2] = $5; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
		END { printf "test"; for (j = 1; j <= n; j++) printf "\t%s", v[j]; print "";
		      for (i = 1; i <= k; i++) { printf "%s", order[i];
			for (j = 1; j <= n; j++) printf "\t%s", ((order[i], v[j]) in r) ? r[order[i], v[j]] : "-"; print "" } }' \
		"$OUT/results.tsv" > "$OUT/plot.tsv"
	gnuplot -c bench/plot.gp "$OUT/plot.tsv" "$OUT/results.png"
	rm -f "$OUT/plot.tsv"
fi
cat "$OUT/results.md"
