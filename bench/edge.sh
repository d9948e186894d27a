#!/usr/bin/env bash
# bench/edge.sh [ROUNDS] [OUT_PREFIX] - an nginx-style server (its one
# connection registered EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, as nginx
# registers every connection) answering a blocking client's requests one
# at a time (`shunt bench-worker edge SIZE N`): the round trip, the server's
# epoll wake-ups a request and those that reported room only (no EPOLLIN),
# and both ends' CPU a request.  TCP reports room to such a registration
# only after a writer found none; until the forty-eighth session shunt
# reported it each time the peer read (docs/architecture.md, "epoll").
# Variants, alternated ROUNDS times (default 3): TCP; this checkout's
# library; an older build's if OLD=DIR names one (DIR/libshunt.so).
# Request sizes: SIZES (default "64 4096").  Writes OUT_PREFIX.tsv, .md and
# .png (default docs/bench/edge).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-3}
OUT=${2:-$ROOT/docs/bench/edge}
N=${N:-20000}
SIZES=${SIZES:-64 4096}
BUILD=${BUILD:-build}
T=$(mktemp -d /tmp/shunt-edge.XXXXXX)
trap 'rm -rf "$T"' EXIT
make -s -C "$ROOT" BUILD="$BUILD" all
NAMES=(tcp shunt)
LIBS=("" "$ROOT/$BUILD/libshunt.so")
if [ -n "${OLD:-}" ]; then
	NAMES+=(old)
	LIBS+=("$OLD/libshunt.so")
fi
printf 'variant\tround\tsize\trt_us\twakes\troom_only\tserver_cpu_us\tclient_cpu_us\n' > "$OUT.tsv"
for r in $(seq "$ROUNDS"); do
	for size in $SIZES; do
		for i in "${!NAMES[@]}"; do
			E=(env -u LD_PRELOAD)
			[ -z "${LIBS[$i]}" ] || E=(env SHUNT_DIR="$T" LD_PRELOAD="${LIBS[$i]}")
			read -r rt wakes room scpu ccpu < <("${E[@]}" "$ROOT/$BUILD/shunt" bench-worker edge "$size" "$N")
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${NAMES[$i]}" "$r" "$size" "$rt" "$wakes" "$room" \
				"$scpu" "$ccpu" >> "$OUT.tsv"
		done
	done
done
# medians by variant and size; ratios to TCP's in the same run
med() { awk -F'\t' -v v="$1" -v s="$2" -v c="$3" '$1 == v && $3 == s { print $c }' "$OUT.tsv" |
	sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
{
	echo "Medians of $ROUNDS alternated runs ($(git -C "$ROOT" rev-parse --short HEAD)): $N requests, one at a time, to a server whose connection is registered EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET."
	echo
	echo "| request | variant | round trip (us) | server wake-ups a request | of them room only | CPU a request, both ends (us) |"
	echo "|---:|---|---:|---:|---:|---:|"
	for size in $SIZES; do
		trt=$(med tcp "$size" 4)
		tcpu=$(awk -v a="$(med tcp "$size" 7)" -v b="$(med tcp "$size" 8)" 'BEGIN { print a + b }')
		for v in "${NAMES[@]}"; do
			awk -v s="$size" -v v="$v" -v rt="$(med "$v" "$size" 4)" -v trt="$trt" -v w="$(med "$v" "$size" 5)" \
				-v ro="$(med "$v" "$size" 6)" -v c="$(med "$v" "$size" 7)" -v d="$(med "$v" "$size" 8)" -v tc="$tcpu" \
				'BEGIN { printf "| %d B | %s | %.2f (%.2fx TCP'"'"'s) | %.2f | %.2f | %.2f (%.2fx) |\n", s, v, rt, rt / trt, w, ro, c + d, (c + d) / tc }'
		done
	done
} > "$OUT.md"
cat "$OUT.md"
# shellcheck source=bench/bars.sh
. "$ROOT/bench/bars.sh"
awk -F'\t' -v OFS='\t' 'NR == 1 { print "group", "variant", "round", "value"; next }
	{ print $3 "/" $2, $1, $2, $5 }' "$OUT.tsv" > "$OUT.plot.tsv"
bars "$OUT.plot" "nginx-style edge-triggered server: epoll wake-ups a request (request bytes / round)" "wake-ups a request" "" "${NAMES[@]}"
[ -f "$OUT.plot.png" ] && mv "$OUT.plot.png" "$OUT.png"
rm -f "$OUT.plot.tsv"
