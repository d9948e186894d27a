#!/usr/bin/env bash
# bench/fdtable.sh [ROUNDS] [OUT_PREFIX] - what shunt's own descriptors cost
# a process under a large RLIMIT_NOFILE (containers get 1,048,576).  The
# kernel sizes a process's descriptor table to its highest number, and each
# fork copies it.  Measured, alternated ROUNDS times (default 3): a server
# that forks a process for each connection (`shunt bench-worker setup-floor
# 1 $PER fork`: connections a second, CPU time a connection) on TCP, under
# shunt, and under an older build's library if OLD=DIR names one
# (DIR/libshunt.so); and once per variant, ten processes each holding a
# connection (`bench-worker hold`): their table's size (FDSize) and the
# kernel's vmalloc memory they add.  The limit needs CAP_SYS_RESOURCE
# (this host's hard limit is 20,000), so by default the script boots the
# test guest and runs there (GUEST=0: here, at the highest limit allowed);
# the guest's figures are emulation's, the ratios are what counts.  Writes
# OUT_PREFIX.tsv, .md and .png (default docs/bench/fdtable).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-3}
OUT=${2:-$ROOT/docs/bench/fdtable}
LIMIT=${LIMIT:-1048576}
PER=${PER:-200}
if [ "${GUEST:-1}" = 1 ]; then
	make -s -C "$ROOT" all
	T=$(mktemp)
	trap 'rm -f "$T"' EXIT
	"$ROOT/tests/vm/run.sh" -t 1200 -- env GUEST=0 LIMIT="$LIMIT" PER="$PER" OLD="${OLD:-}" \
		bash bench/fdtable.sh "$ROUNDS" - | tee "$T"
	grep -P '^(fork-rate|fork-cpu|fdsize|vmalloc-kb)\t' "$T" > "$OUT.tsv.tmp" || true
	[ -s "$OUT.tsv.tmp" ] || { echo "fdtable.sh: no figures from the guest" >&2; exit 1; }
	{ printf 'metric\tvariant\tround\tvalue\n'; cat "$OUT.tsv.tmp"; } > "$OUT.tsv"
	rm -f "$OUT.tsv.tmp"
else
	ulimit -Hn "$LIMIT" 2> /dev/null || true
	ulimit -Sn "$LIMIT" 2> /dev/null || ulimit -Sn "$(ulimit -Hn)"
	D=$(mktemp -d /tmp/shunt-fdtable.XXXXXX)
	trap 'rm -rf "$D"' EXIT
	chmod 0700 "$D"
	NAMES=(tcp shunt)
	ENVS=("-u LD_PRELOAD" "SHUNT_DIR=$D LD_PRELOAD=$ROOT/build/libshunt.so SHUNT_BUSY_SHORT=0")
	if [ -n "${OLD:-}" ]; then
		NAMES+=(old)
		ENVS+=("SHUNT_DIR=$D LD_PRELOAD=$OLD/libshunt.so SHUNT_BUSY_SHORT=0")
	fi
	echo "RLIMIT_NOFILE $(ulimit -Sn)" >&2
	vm() { awk '/^VmallocUsed:/ {print $2}' /proc/meminfo; }
	for i in "${!NAMES[@]}"; do
		before=$(vm)
		for j in $(seq 10); do
			# shellcheck disable=SC2086 # ENVS holds words for env
			env ${ENVS[$i]} "$ROOT/build/shunt" bench-worker hold 4 > "$D/hold.$i.$j" &
		done
		sleep 2.5
		after=$(vm)
		wait
		printf 'vmalloc-kb\t%s\t1\t%s\n' "${NAMES[$i]}" "$((after - before))"
		printf 'fdsize\t%s\t1\t%s\n' "${NAMES[$i]}" "$(sort -n "$D"/hold."$i".* | tail -1)"
	done
	for r in $(seq "$ROUNDS"); do
		for i in "${!NAMES[@]}"; do
			# shellcheck disable=SC2086
			out=$(env ${ENVS[$i]} "$ROOT/build/shunt" bench-worker setup-floor 1 "$PER" fork)
			read -r rate cpu <<< "$out"
			printf 'fork-rate\t%s\t%s\t%s\n' "${NAMES[$i]}" "$r" "$rate"
			printf 'fork-cpu\t%s\t%s\t%s\n' "${NAMES[$i]}" "$r" "$cpu"
		done
	done
	exit 0
fi
# medians, ratios to TCP's, the table and the plot
tail -n +2 "$OUT.tsv" | sort -t "$(printf '\t')" -k1,1 -k2,2 -k4,4g |
	awk -F'\t' '{ k = $1 "\t" $2; n[k]++; v[k, n[k]] = $4 }
		END { for (k in n) print k "\t" v[k, int((n[k] + 1) / 2)] }' > "$OUT.med"
{
	echo "| | connections a second | CPU a connection | FDSize (10 processes) | vmalloc memory they add |"
	echo "|---|---:|---:|---:|---:|"
	for v in tcp shunt old; do
		grep -qP "^fork-rate\t$v\t" "$OUT.med" || continue
		get() { awk -F'\t' -v m="$1" -v v="$2" '$1 == m && $2 == v { print $3 }' "$OUT.med"; }
		rate=$(get fork-rate $v) cpu=$(get fork-cpu $v)
		awk -v v=$v -v r="$rate" -v c="$cpu" -v tr="$(get fork-rate tcp)" -v tc="$(get fork-cpu tcp)" \
			-v fd="$(get fdsize $v)" -v kb="$(get vmalloc-kb $v)" 'BEGIN {
			printf "| %s | %d (%.2fx) | %d us (%.2fx) | %d | %d KiB |\n", v, r, r / tr, c, c / tc, fd, kb }'
	done
} > "$OUT.md"
rm -f "$OUT.med"
cat "$OUT.md"
# shellcheck source=bench/bars.sh
. "$ROOT/bench/bars.sh"
awk -F'\t' -v OFS='\t' 'NR == 1 { print } $1 == "fork-rate" { print "round " $3, $2, $3, $4 }' "$OUT.tsv" > "$OUT.plot.tsv"
bars "$OUT.plot" "A process forked a connection, open-files limit $LIMIT (test guest)" "connections a second" "" tcp shunt old
[ -f "$OUT.plot.png" ] && mv "$OUT.plot.png" "$OUT.png"
rm -f "$OUT.plot.tsv"
