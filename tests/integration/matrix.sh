#!/usr/bin/env bash
# Description: every combination the negotiation must get right - shunt or
# plain client x shunt or plain server x client-speaks-first or
# server-speaks-first x 127.0.0.1, another loopback address on a 0.0.0.0
# listener, ::1 and this host's own non-loopback address.  Data is checked
# both ways; only shunt-to-shunt is accelerated; a shunt end facing a plain
# one is plain with reason peer-not-shunt (1); a plain peer sees no added
# delay (its first byte within 20 ms of the all-plain run's).
. "$(dirname "$0")/lib.sh"
PEER="$ROOT/$BUILD/tests/tools/peer"
[ -x "$PEER" ] || die "build the tests first (make tests)"

host_ip=$(ip -4 -o addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
cases=("127.0.0.1 127.0.0.1" "0.0.0.0 127.0.0.2" "::1 ::1")
[ -n "$host_ip" ] && cases+=("0.0.0.0 $host_ip")

run_pair() { # listen dial order srv_shunt cli_shunt -> prints "srvline|cliline"
	local P; P=$(free_port)
	local pre_s=() pre_c=()
	[ "$4" = 1 ] && pre_s=("$SHUNT" run --)
	[ "$5" = 1 ] && pre_c=("$SHUNT" run --)
	: > "$WORK/srv.out" # a stale "listening" must not start the client
	"${pre_s[@]}" "$PEER" server "$1" "$P" "$3" > "$WORK/srv.out" 2>"$WORK/srv.err" &
	local spid=$!
	for _ in $(seq 100); do grep -q listening "$WORK/srv.out" 2>/dev/null && break; sleep 0.02; done
	"${pre_c[@]}" "$PEER" client "$2" "$P" "$3" > "$WORK/cli.out" 2>"$WORK/cli.err" || die "client failed: $(cat "$WORK/cli.err")"
	wait "$spid" || die "server failed: $(cat "$WORK/srv.err")"
	echo "$(grep role= "$WORK/srv.out")|$(cat "$WORK/cli.out")"
}

field() { echo "$1" | tr ' ' '\n' | grep "^$2=" | cut -d= -f2; }

n=0
for c in "${cases[@]}"; do
	set -- $c; listen=$1 dial=$2
	for order in cfirst sfirst; do
		base=$(run_pair "$listen" "$dial" "$order" 0 0)
		base_us=$(field "${base#*|}" first_byte_us)
		for s in 0 1; do for k in 0 1; do
			out=$(run_pair "$listen" "$dial" "$order" "$s" "$k")
			srv=${out%%|*}; cli=${out#*|}
			want_s=none want_c=none
			if [ $s = 1 ] && [ $k = 1 ]; then want_s=shm want_c=shm
			else [ $s = 1 ] && want_s=tcp; [ $k = 1 ] && want_c=tcp; fi
			[ "$(field "$srv" mode)" = "$want_s" ] || die "$dial $order server=$s client=$k: server $srv"
			[ "$(field "$cli" mode)" = "$want_c" ] || die "$dial $order server=$s client=$k: client $cli"
			[ "$want_s" = tcp ] && { [ "$(field "$srv" reason)" = 1 ] || die "server reason: $srv"; }
			[ "$want_c" = tcp ] && { [ "$(field "$cli" reason)" = 1 ] || die "client reason: $cli"; }
			if [ "$want_c" != shm ]; then
				us=$(field "$cli" first_byte_us)
				[ "$us" -le $((base_us + 20000)) ] || die "$dial $order server=$s client=$k: first byte after $us us (plain: $base_us us)"
			fi
			n=$((n + 1))
		done; done
	done
	echo "  $dial (listener $listen): 8 combinations ok"
done
echo "matrix: $n combinations ok"
