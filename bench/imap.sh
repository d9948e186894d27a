#!/usr/bin/env bash
# bench/imap.sh [ROUNDS] [OUT_PREFIX] - dovecot's IMAP server, N sessions
# one after the other (connect, greeting, LOGIN, LOGOUT: each a new login
# process - dovecot's default), Python's imaplib as the client: plain TCP,
# then server and client both under shunt, and, with BEFORE=DIR (another
# build's directory, e.g. a worktree of an older commit), under that
# build's shunt; alternated ROUNDS times (default 3).  Two set-ups: Debian's
# default (login processes chroot: their connections stay plain), and
# login processes not chrooted with a shared SHUNT_DIR (accelerated until
# the login process passes the connection on, then TCP).  Medians of
# sessions a second and their ratio to TCP's in the same round; writes
# OUT_PREFIX.tsv, .md and .png (default docs/bench/imap).  Needs dovecot
# (scripts/deps.sh installs it) and root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-3}
OUT=${2:-$ROOT/docs/bench/imap}
N=${N:-40}
command -v dovecot > /dev/null || { echo "imap.sh: no dovecot (apt-get install dovecot-imapd)" >&2; exit 1; }
make -s -C "$ROOT" all
T=$(mktemp -d /tmp/shunt-imap.XXXXXX)
chmod 755 "$T"
mkdir -p "$T/run" "$T/home" "$T/shared"
chmod 1777 "$T/shared"
chown 65534:65534 "$T/home"
echo 'alice:{PLAIN}secret' > "$T/passwd"
P=$((20000 + RANDOM % 10000))
srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$T"' EXIT
for setup in chroot shared; do
	bash "$ROOT/tests/tools/dovecot_conf.sh" "$T" "$P" "$([ $setup = shared ] && echo no || echo yes)" > "$T/$setup.conf"
done
cat > "$T/client.py" <<'PY'
import imaplib, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
t = time.time()
for i in range(n):
    M = imaplib.IMAP4('127.0.0.1', port)
    M.login('alice', 'secret')
    M.logout()
print("%.1f" % (n / (time.time() - t)))
PY
: > "$T/runs"
for r in $(seq "$ROUNDS"); do
	for setup in chroot shared; do
		for v in tcp shunt ${BEFORE:+before}; do
			case $v in
			tcp) pre=(env) ;;
			shunt) pre=("$ROOT/build/shunt" run --) ;;
			before) pre=("$BEFORE/shunt" run --) ;;
			esac
			dir=$([ $setup = shared ] && echo "$T/shared" || echo "$T/dir-$v")
			SHUNT_DIR=$dir "${pre[@]}" dovecot -F -c "$T/$setup.conf" > /dev/null 2>&1 &
			srv=$!
			for _ in $(seq 100); do ss -Htln "sport = :$P" | grep -q . && break; sleep 0.05; done
			rate=$(SHUNT_DIR=$dir "${pre[@]}" python3 "$T/client.py" "$P" "$N")
			kill $srv; wait $srv 2> /dev/null || true; srv=
			for _ in $(seq 100); do ss -Htln "sport = :$P" | grep -q . || break; sleep 0.05; done
			echo "$setup $v $rate $r" >> "$T/runs"
		done
	done
	echo "round $r done" >&2
done
python3 - "$T/runs" "$OUT" "$(git -C "$ROOT" rev-parse --short HEAD)" "$N" <<'PY'
import statistics, sys
runs, out, rev, n = sys.argv[1:5]
d, variants = {}, []
for line in open(runs):
    s, v, rate, r = line.split()
    d.setdefault((s, r), {})[v] = float(rate)
    if v not in variants:
        variants.append(v)
with open(out + ".tsv", "w") as t, open(out + ".md", "w") as m:
    t.write("setup\tvariant\tmedian_sessions_per_s\tratio_to_tcp\n")
    m.write(f"dovecot IMAP, {n} sessions one after the other (connect, LOGIN, LOGOUT), server and "
            f"client on one host, medians of {len({r for _, r in d})} alternated rounds ({rev}): "
            "sessions a second (ratio to TCP's in the same round).\n\n"
            "| login processes | " + " | ".join(variants) + " |\n|---|" + "---:|" * len(variants) + "\n")
    for s in ("chroot", "shared"):
        rounds = [x for (ss, _), x in d.items() if ss == s]
        cells = []
        for v in variants:
            med = statistics.median(x[v] for x in rounds)
            ratio = statistics.median(x[v] / x["tcp"] for x in rounds)
            t.write(f"{s}\t{v}\t{med:.1f}\t{ratio:.2f}\n")
            cells.append(f"{med:.1f}" + ("" if v == "tcp" else f" ({ratio:.2f}x)"))
        label = "chrooted (Debian's default)" if s == "chroot" else "not chrooted, shared SHUNT_DIR"
        m.write(f"| {label} | " + " | ".join(cells) + " |\n")
PY
. "$ROOT/bench/bars.sh"
bars "$OUT" 'dovecot IMAP sessions a second against TCP (1 = TCP)' 'ratio to TCP' ', 1 notitle lw 2' $(awk 'NR>1{print $2}' "$OUT.tsv" | awk '!s[$0]++')
cat "$OUT.md"
