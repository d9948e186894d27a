#!/usr/bin/env bash
# bench/agent.sh - connection setup + first byte (median of 2000) in a cgroup
# with and without shuntd's sock_ops program attached, in one run:
#   plain, no agent           the baseline
#   plain, agent attached     must be unchanged within noise (plain sockets
#                             are never registered: no option, no work)
#   negotiated, agent         both ends under shunt with SHUNT_LOCAL=0, so
#                             the option exchange and the in-band handshake
#                             decide (one host: shared memory, chosen in-band)
# Appends to docs/bench/agent.tsv and prints a table.  Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
make -s
[ "$(id -u)" = 0 ] || { echo "needs root"; exit 1; }
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
CG="$cg2/shunt-bench-$$"
mkdir "$CG"
export SHUNT_DIR; SHUNT_DIR=$(mktemp -d /tmp/shunt-bench.XXXXXX)
agent=
trap '[ -n "$agent" ] && kill $agent 2>/dev/null; wait 2>/dev/null; rmdir "$CG" 2>/dev/null; rm -rf "$SHUNT_DIR"' EXIT
in_cg() { sh -c "echo \$\$ > '$CG/cgroup.procs'; exec \"\$@\"" sh "$@"; }
setup() { in_cg "$@" build/shunt bench-worker setup 2000; }
LIB="$ROOT/build/libshunt.so"

base=$(setup env)
build/shuntd --cgroup "$CG" > "$SHUNT_DIR/agent.log" 2>&1 &
agent=$!
for _ in $(seq 100); do grep -q ready "$SHUNT_DIR/agent.log" && break; sleep 0.05; done
with=$(setup env)
nego=$(setup env SHUNT_LOCAL=0 LD_PRELOAD="$LIB")
local_shm=$(setup env LD_PRELOAD="$LIB")
mkdir -p docs/bench
{
	echo -e "variant\tsetup_us\tvs_plain"
	for row in "plain-no-agent $base" "plain-with-agent $with" "negotiated-inband-shm $nego" "shunt-shm-same-host $local_shm"; do
		set -- $row
		echo -e "$1\t$2\t$(awk -v a="$2" -v b="$base" 'BEGIN{printf "%.2f", a/b}')"
	done
} | tee docs/bench/agent.tsv
if command -v gnuplot > /dev/null; then
	gnuplot -e "set terminal pngcairo size 800,420 font ',10'; set output 'docs/bench/agent.png';
		set datafile separator '\t'; set style data histograms; set style fill solid 0.85 border -1;
		set boxwidth 0.7; set ylabel 'setup + first byte, us (median of 2000)'; set grid ytics;
		set yrange [0:*]; set key off; set xtics rotate by -15;
		set title 'connection setup with and without the agent (one run, 2-vCPU VM)';
		plot 'docs/bench/agent.tsv' using 2:xtic(1) skip 1 lc rgb '#4472c4'"
fi
