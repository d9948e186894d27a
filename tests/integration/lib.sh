# tests/integration/lib.sh - shared helpers for the real-program tests.
# Each test runs unmodified Debian programs with shunt on both sides and on
# one side only, checks the data, and checks from shunt's own decision log
# (SHUNT_LOG=1) that connections were accelerated - or plain, with the
# reason peer-not-shunt, when one side runs without shunt.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
SHUNT="$ROOT/$BUILD/shunt"
export SHUNT_DIR; SHUNT_DIR=$(mktemp -d /tmp/shunt-integ.XXXXXX)
WORK=$(mktemp -d /tmp/shunt-work.XXXXXX)
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	[ -z "${KEEP:-}" ] || { echo "kept $WORK"; return; }
	rm -rf "$WORK" "$SHUNT_DIR"
}
trap cleanup EXIT

die() { echo "FAIL: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || { echo "skip: $1 is not installed"; exit 77; }; }

free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 12000)) # below the ephemeral range
		ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
	done
	die "no free port"
}

wait_port() { # port
	for _ in $(seq 100); do
		ss -Htln "sport = :$1" | grep -q . && return 0
		sleep 0.05
	done
	die "nothing listens on port $1"
}

# bg LOG CMD... : start in the background, remember the pid.
bg() {
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
}

shunted() { SHUNT_LOG=1 "$SHUNT" run -- "$@"; }

# workers_share_dir: a server whose workers drop to another user (nginx's
# www-data, Apache's nobody) shares a world-writable sticky rendezvous
# directory with its clients (the trust domain, docs/configuration.md),
# and $WORK is readable to them.
workers_share_dir() {
	export SHUNT_DIR="$WORK/shared"
	mkdir -p "$SHUNT_DIR"
	chmod 1777 "$SHUNT_DIR"
	chmod 755 "$WORK"
}

count() { grep -c -- "$1" "$2" 2>/dev/null || true; }

# nginx_conf SERVER...: an nginx.conf for $WORK (master and 2 workers, no
# access log, its files under $WORK) whose http block holds SERVER.
nginx_conf() {
	cat <<CONF
daemon off;
master_process on;
worker_processes 2;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path $WORK/tmp; proxy_temp_path $WORK/tmp; fastcgi_temp_path $WORK/tmp;
	uwsgi_temp_path $WORK/tmp; scgi_temp_path $WORK/tmp;
	$*
}
CONF
}

# expect_accel LOG MIN: at least MIN accelerated accepts/connects, no plain ones.
expect_accel() {
	local n plain
	n=$(count ': shm' "$1"); n2=$(count 'accelerated (shm)' "$1"); n=$((n + n2))
	plain=$(grep -E '(accept|connect) fd [0-9]+: tcp' "$1" | head -3)
	[ "$n" -ge "$2" ] || die "$1: $n accelerated connections, expected >= $2"
	[ -z "$plain" ] || die "$1: plain connections where shm was expected: $plain"
	echo "  $(basename "$1"): $n accelerated"
}

# expect_accel_busy SRV_LOG CLI_LOG MIN: the same for a burst that loads
# both CPUs against an event-loop server (non-blocking accept()): at least
# MIN accelerated on the client; a plain one only where the server's
# accept() came before its client's offer - the client says server-first
# (reason 29: a non-blocking accept() never sleeps for an offer,
# docs/fallback-codes.md), its server peer-not-shunt - and at most one in
# twenty of them.
expect_accel_busy() {
	local n total sf other splain
	n=$(count 'accelerated (shm)' "$2")
	total=$(grep -cE 'connect fd [0-9]+: ' "$2" || true)
	sf=$(count 'tcp, server-first' "$2")
	other=$(grep -E 'connect fd [0-9]+: tcp' "$2" | grep -v 'server-first' | head -3)
	splain=$(grep -E 'accept fd [0-9]+: tcp' "$1" | grep -vc 'peer-not-shunt' || true)
	[ "$n" -ge "$3" ] || die "$2: $n accelerated connections, expected >= $3"
	[ -z "$other" ] || die "$2: plain connections where shm was expected: $other"
	[ "$splain" -eq 0 ] || die "$1: plain accepts for another reason than a late offer"
	[ "$(count 'tcp, peer-not-shunt' "$1")" -le "$sf" ] || die "$1: more plain accepts than server-first clients"
	[ $((sf * 20)) -le "$total" ] || die "$2: $sf of $total connections plain (server-first)"
	echo "  $(basename "$2"): $n of $total accelerated, $sf server-first"
}

# expect_plain LOG: connections seen, all plain because the peer is not shunt.
expect_plain() {
	local n shm
	n=$(count 'tcp, peer-not-shunt' "$1")
	shm=$(count 'shm' "$1")
	[ "$n" -ge 1 ] || die "$1: no plain (peer-not-shunt) decision logged"
	[ "$shm" -eq 0 ] || die "$1: $shm accelerated connections with a plain peer"
	echo "  $(basename "$1"): $n plain (peer-not-shunt)"
}

# faulted_runs N PROG VAR=VALUE...: the behaviour program tests/behave/PROG
# N times under the fault-injection build with the faults given (each run
# with SHUNT_EXPECT=shm and every connection offered); dies with a failed
# run's log.  The last run's log stays in $WORK/run.log.
faulted_runs() {
	local n=$1 prog="$ROOT/$BUILD/tests/behave/$2" faults="$ROOT/$BUILD/libshunt-faults.so" i
	shift 2
	[ -f "$faults" ] && [ -x "$prog" ] || die "missing $faults or $prog (make tests)"
	for i in $(seq "$n"); do
		env LD_PRELOAD="$faults" "$@" SHUNT_EXPECT=shm SHUNT_BUSY_SHORT=0 "$prog" \
			> "$WORK/run.log" 2>&1 || die "run $i: $(tail -20 "$WORK/run.log")"
	done
}
