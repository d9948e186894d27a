#!/usr/bin/env bash
# Description: redis-server and redis-benchmark/redis-cli, unmodified: with
# shunt on both sides every connection is accelerated and values come back
# intact; with shunt on one side only, everything is plain TCP and works.
. "$(dirname "$0")/lib.sh"
need redis-server; need redis-benchmark; need redis-cli

start_redis() { # port log shunt?
	if [ "$3" = 1 ]; then
		bg "$2" env SHUNT_LOG=1 "$SHUNT" run -- redis-server --port "$1" --save '' --appendonly no
	else
		bg "$2" redis-server --port "$1" --save '' --appendonly no
	fi
	wait_port "$1"
}

big=$(head -c 300000 /dev/urandom | base64 -w0)

# both sides
P=$(free_port); start_redis "$P" "$WORK/srv.log" 1
out=$(shunted redis-benchmark -p "$P" -t set,get -n 20000 -c 20 -q 2>"$WORK/cli.log" | tr '\r' '\n' | grep 'requests per second')
echo "$out" | grep -q '^SET' && echo "$out" | grep -q '^GET' || die "redis-benchmark: $out"
shunted redis-cli -p "$P" -x set big <<<"$big" 2>>"$WORK/cli.log" | grep -q OK || die "SET big"
got=$(shunted redis-cli -p "$P" get big 2>>"$WORK/cli.log")
[ "$got" = "$big" ] || die "GET big returned different bytes"
expect_accel "$WORK/srv.log" 20
expect_accel "$WORK/cli.log" 20

# plain client, shunt server
got=$(redis-cli -p "$P" get big)
[ "$got" = "$big" ] || die "plain client: GET big differs"
redis-benchmark -p "$P" -t get -n 2000 -c 5 -q >/dev/null 2>&1 || die "plain redis-benchmark"
grep 'accept fd' "$WORK/srv.log" | tail -n 5 > "$WORK/srv-plain.log"
expect_plain "$WORK/srv-plain.log"

# shunt client, plain server
P2=$(free_port); start_redis "$P2" "$WORK/srv2.log" 0
shunted redis-cli -p "$P2" -x set big <<<"$big" 2>"$WORK/cli2.log" | grep -q OK || die "SET on plain server"
got=$(shunted redis-cli -p "$P2" get big 2>>"$WORK/cli2.log")
[ "$got" = "$big" ] || die "plain server: GET big differs"
expect_plain "$WORK/cli2.log"
echo "redis: ok"
