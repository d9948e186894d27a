#!/usr/bin/env bash
# bench/reuseport.sh [ROUNDS] [OUT_PREFIX] - a port served by a SO_REUSEPORT
# group with a member that shunt does not serve (docs/architecture.md, known
# limits): two Python echo servers on one port, one under shunt and one
# plain, and a Python client under shunt making N connections (a byte each
# way); connections a second, and how many took over 50 ms.  Variants,
# alternated ROUNDS times (default 3): TCP (nobody under shunt); this
# checkout's library; an older build's if OLD=DIR names one
# (DIR/libshunt.so).  Writes OUT_PREFIX.tsv, .md and .png (default
# docs/bench/reuseport).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-3}
OUT=${2:-$ROOT/docs/bench/reuseport}
N=${N:-200}
T=$(mktemp -d /tmp/shunt-reuseport.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2> /dev/null; rm -rf "$T"' EXIT
make -s -C "$ROOT" all
cat > "$T/srv.py" <<'PY'
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(128)
open(sys.argv[2], "w").close()
while True:
    c, _ = l.accept()
    c.sendall(c.recv(1)); c.close()
PY
cat > "$T/cli.py" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
slow, t0 = 0, time.time()
for i in range(n):
    t = time.time()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"x")
    assert s.recv(1) == b"x"
    s.close()
    slow += time.time() - t > 0.05
print("%.0f %d" % (n / (time.time() - t0), slow))
PY
NAMES=(tcp shunt)
LIBS=("" "$ROOT/build/libshunt.so")
if [ -n "${OLD:-}" ]; then
	NAMES+=(old)
	LIBS+=("$OLD/libshunt.so")
fi
port=$((10000 + RANDOM % 20000)) # below the ephemeral range
printf 'variant\tround\tconns_per_s\tslow\n' > "$OUT.tsv"
for r in $(seq "$ROUNDS"); do
	for i in "${!NAMES[@]}"; do
		port=$((port + 1))
		mkdir -m 0700 "$T/d$port"
		E=(env -u LD_PRELOAD)
		[ -z "${LIBS[$i]}" ] || E=(env SHUNT_DIR="$T/d$port" LD_PRELOAD="${LIBS[$i]}")
		"${E[@]}" python3 "$T/srv.py" "$port" "$T/up.a$port" & PIDS+=($!)
		env -u LD_PRELOAD python3 "$T/srv.py" "$port" "$T/up.b$port" & PIDS+=($!)
		for _ in $(seq 200); do [ -e "$T/up.a$port" ] && [ -e "$T/up.b$port" ] && break; sleep 0.05; done
		read -r rate slow < <("${E[@]}" python3 "$T/cli.py" "$port" "$N")
		printf '%s\t%s\t%s\t%s\n' "${NAMES[$i]}" "$r" "$rate" "$slow" >> "$OUT.tsv"
		kill "${PIDS[@]}" 2> /dev/null || true
		wait 2> /dev/null || true
		PIDS=()
	done
done
# medians, ratio to TCP's
med() { awk -F'\t' -v v="$1" -v c="$2" '$1 == v { print $c }' "$OUT.tsv" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
{
	echo "Medians of $ROUNDS alternated runs ($(git -C "$ROOT" rev-parse --short HEAD)): $N connections, one plain member of two in the port's SO_REUSEPORT group."
	echo
	echo "| | connections a second | connections over 50 ms |"
	echo "|---|---:|---:|"
	tcp=$(med tcp 3)
	for v in "${NAMES[@]}"; do
		awk -v v="$v" -v r="$(med "$v" 3)" -v t="$tcp" -v s="$(med "$v" 4)" \
			'BEGIN { printf "| %s | %d (%.2fx) | %d |\n", v, r, r / t, s }'
	done
} > "$OUT.md"
cat "$OUT.md"
# shellcheck source=bench/bars.sh
. "$ROOT/bench/bars.sh"
awk -F'\t' -v OFS='\t' 'NR == 1 { print "group", "variant", "round", "value"; next }
	{ print "round " $2, $1, $2, $3 }' "$OUT.tsv" > "$OUT.plot.tsv"
bars "$OUT.plot" "One plain member in a reuseport group: connections a second" "connections a second" "" "${NAMES[@]}"
[ -f "$OUT.plot.png" ] && mv "$OUT.plot.png" "$OUT.png"
rm -f "$OUT.plot.tsv"
