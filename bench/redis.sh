#!/usr/bin/env bash
# bench/redis.sh OUT_TSV - redis-benchmark GET/SET (-P 1, 50 clients) against
# an unmodified redis-server, plain TCP then both under shunt, alternating
# three times in one run; appends median requests/s and the ratio to OUT_TSV.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$1
N=${N:-100000}
export SHUNT_DIR; SHUNT_DIR=$(mktemp -d /tmp/shunt-bench.XXXXXX)
P=$((20000 + RANDOM % 10000))
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$SHUNT_DIR"' EXIT

run() { # prefix...
	"$@" redis-server --port "$P" --save '' --appendonly no >/dev/null 2>&1 &
	local srv=$!
	for _ in $(seq 100); do ss -Htln "sport = :$P" | grep -q . && break; sleep 0.05; done
	"$@" redis-benchmark -p "$P" -t set,get -n "$N" -c 50 -P 1 -q 2>/dev/null | tr '\r' '\n' |
		awk '/requests per second/{sub(":","",$1); print $1, $2}'
	kill "$srv"; wait "$srv" 2>/dev/null || true
}

: > "$SHUNT_DIR/raw"
for i in 1 2 3; do
	run env | sed 's/^/tcp /' >> "$SHUNT_DIR/raw"
	run "$ROOT/build/shunt" run -- | sed 's/^/shunt /' >> "$SHUNT_DIR/raw"
done
for op in SET GET; do
	t=$(awk -v o=$op '$1=="tcp" && $2==o {print $3}' "$SHUNT_DIR/raw" | sort -n | sed -n 2p)
	s=$(awk -v o=$op '$1=="shunt" && $2==o {print $3}' "$SHUNT_DIR/raw" | sort -n | sed -n 2p)
	printf 'redis-%s\ttcp-loopback\t%s\treq/s\t1.000\n' "$op" "$t" >> "$OUT"
	printf 'redis-%s\tshunt-default\t%s\treq/s\t%.3f\n' "$op" "$s" "$(echo "$s $t" | awk '{print $1/$2}')" >> "$OUT"
	echo "redis $op: tcp $t req/s, shunt $s req/s ($(echo "$s $t" | awk '{printf "%.2f", $1/$2}')x)"
done
