#!/usr/bin/env bash
# scripts/demo.sh - shunt's main job on one machine: an unmodified
# redis-server and redis-benchmark, first over plain TCP loopback, then both
# under `shunt run`, side by side; `shunt ss` shows the accelerated
# connections while they are open.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null || { echo "redis-server missing: run scripts/deps.sh as root"; exit 1; }
make -s
export SHUNT_DIR; SHUNT_DIR=$(mktemp -d /tmp/shunt-demo.XXXXXX)
P=$((20000 + RANDOM % 10000))
N=${N:-100000}
pids=()
trap 'kill ${pids[@]} 2>/dev/null; wait 2>/dev/null; rm -rf "$SHUNT_DIR"' EXIT

bench() { # label prefix...
	"$@" redis-benchmark -p "$P" -t set,get -n "$N" -q 2>/dev/null | tr '\r' '\n' | grep 'requests per second'
}
wait_port() { for _ in $(seq 100); do ss -Htln "sport = :$P" | grep -q . && return; sleep 0.05; done; }

echo "== 1. plain TCP: redis-server and redis-benchmark unmodified"
redis-server --port "$P" --save '' --appendonly no >/dev/null & pids+=($!)
wait_port
tcp=$(bench env)
echo "$tcp"
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true; pids=()

echo "== 2. the same binaries under shunt run"
build/shunt run -- redis-server --port "$P" --save '' --appendonly no >/dev/null & pids+=($!)
wait_port
build/shunt run -- redis-cli -p "$P" BLPOP demo:nothing 1 >/dev/null &
sleep 0.3
echo "-- shunt ss while a client is connected:"
build/shunt ss
wait $! || true
sh=$(bench build/shunt run --)
echo "$sh"

echo "== comparison (requests per second)"
for op in SET GET; do
	a=$(echo "$tcp" | awk -v o="$op:" '$1==o{print $2}')
	b=$(echo "$sh" | awk -v o="$op:" '$1==o{print $2}')
	awk -v o="$op" -v a="$a" -v b="$b" 'BEGIN{printf "%-4s tcp %10.0f   shunt %10.0f   %.2fx\n", o, a, b, b/a}'
done
