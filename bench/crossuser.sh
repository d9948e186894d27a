#!/usr/bin/env bash
# bench/crossuser.sh ROUNDS [NAME=LIBRARY...] - short connections across
# users: Debian's nginx (one worker, which runs as www-data while its
# master and the client run as root) in a shared sticky SHUNT_DIR, and
# `ab -n 5000 -c C` for C in 1 and 8, one request a connection.  Each
# variant runs both ends under its library (NAME=/path/to/libshunt.so;
# the one built here is "new"), TCP runs neither; variants alternate in
# each round.  Each such connection is checked across users at both ends
# (sock_diag: docs/security.md).  Prints each variant's median requests a
# second and the median of its ratio to TCP's in the same round; writes
# the table to OUT (docs/bench/crossuser.md by default) and the ratios'
# plot beside it (.tsv, .png).  Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-3}
shift || true
OUT=${OUT:-$ROOT/docs/bench/crossuser.md}
command -v nginx > /dev/null && command -v ab > /dev/null || { echo "needs nginx and ab (apache2-utils)" >&2; exit 2; }
make -s -C "$ROOT" all
T=$(mktemp -d /tmp/shunt-xuser.XXXXXX)
chmod 755 "$T"
mkdir -m 1777 "$T/dir"
trap 'pkill -f "nginx -c $T/n.conf" 2> /dev/null; rm -rf "$T"' EXIT
PORT=18891
cat > "$T/n.conf" <<EOF
worker_processes 1;
daemon off;
pid $T/nginx.pid;
error_log $T/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  server { listen 127.0.0.1:$PORT; location / { return 200 "hello\n"; } }
}
EOF
variants=(tcp= "$@" "new=$ROOT/build/libshunt.so")
: > "$T/runs"
for round in $(seq "$N"); do
	for v in "${variants[@]}"; do
		name=${v%%=*} lib=${v#*=}
		env ${lib:+LD_PRELOAD=$lib} SHUNT_DIR="$T/dir" nginx -c "$T/n.conf" &
		for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2> /dev/null && break; sleep 0.1; done
		for c in 1 8; do
			r=$(env ${lib:+LD_PRELOAD=$lib} SHUNT_DIR="$T/dir" ab -q -n 5000 -c $c "http://127.0.0.1:$PORT/" |
				awk '/Requests per second/ {print $4}')
			echo "$round $name $c $r" >> "$T/runs"
		done
		pkill -f "nginx -c $T/n.conf"; wait 2> /dev/null || true
	done
done
python3 - "$T/runs" "$OUT" "$N" <<'PY'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
rate = {(r, n, c): float(x) for r, n, c, x in runs}
names = list(dict.fromkeys(n for _, n, _, _ in runs))
rounds = sorted({r for r, _, _, _ in runs})
tsv = ["group\tvariant\trate\tratio"]
for n in names:
    for c in ("1", "8"):
        tsv.append(f"ab -c {c}\t{n}\t{statistics.median(rate[(r, n, c)] for r in rounds):.0f}\t"
                   f"{statistics.median(rate[(r, n, c)] / rate[(r, 'tcp', c)] for r in rounds):.3f}")
open(sys.argv[2][:-3] + ".tsv", "w").write("\n".join(tsv) + "\n")
lines = [f"nginx (one www-data worker) and ab, both under each library, shared SHUNT_DIR; {sys.argv[3]} rounds, alternated; requests a second (median) and the median ratio to TCP's in the same round", "",
         "| variant | ab -c 1 | ratio | ab -c 8 | ratio |", "|---|---:|---:|---:|---:|"]
for n in names:
    row = [n]
    for c in ("1", "8"):
        row.append(f"{statistics.median(rate[(r, n, c)] for r in rounds):,.0f}")
        row.append(f"{statistics.median(rate[(r, n, c)] / rate[(r, 'tcp', c)] for r in rounds):.2f}x")
    lines.append("| " + " | ".join(row) + " |")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
. "$ROOT/bench/bars.sh"
# shellcheck disable=SC2046 # the variants' names, one word each
bars "${OUT%.md}" "nginx (www-data worker) and ab across users: short connections" "requests a second, ratio to TCP" \
	", 1 notitle lw 2" $(for v in "${variants[@]}"; do echo "${v%%=*}"; done)
