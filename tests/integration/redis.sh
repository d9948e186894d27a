#!/usr/bin/env bash
# Description: redis-server and redis-benchmark/redis-cli, unmodified: with
# shunt on both sides every connection is accelerated and values come back
# intact; with shunt on one side only, everything is plain TCP and works.
# A replica under shunt syncs from a master under shunt - the RDB file from
# disk, written as the master's event loop reports room, after the BGSAVE
# child (a fork holding the connection) ended; then diskless - and both
# hold the same values (before the thirty-sixth session the child's exit took
# the connection out of the master's epoll set: the sync stalled at 256 KiB).
. "$(dirname "$0")/lib.sh"
need redis-server; need redis-benchmark; need redis-cli

start_redis() { # port log shunt?
	if [ "$3" = 1 ]; then
		bg "$2" env SHUNT_LOG=1 "$SHUNT" run -- redis-server --port "$1" --save '' --appendonly no --dir "$WORK"
	else
		bg "$2" redis-server --port "$1" --save '' --appendonly no --dir "$WORK"
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
# replication, both under shunt: the same values on both
P3=$(free_port); start_redis "$P3" "$WORK/master.log" 1
same() { # port port: every key's value alike
	local k
	for k in $(redis-cli -p "$1" keys 'k*'); do
		[ "$(redis-cli -p "$1" get "$k" | sha256sum)" = "$(redis-cli -p "$2" get "$k" | sha256sum)" ] || return 1
	done
	[ "$(redis-cli -p "$1" dbsize)" = "$(redis-cli -p "$2" dbsize)" ]
}
for mode in no yes; do
	shunted redis-cli -p "$P3" config set repl-diskless-sync "$mode" > /dev/null 2>> "$WORK/cli3.log"
	shunted redis-cli -p "$P3" config set repl-diskless-sync-delay 0 > /dev/null 2>> "$WORK/cli3.log"
	for i in $(seq 20); do echo "SET k$mode$i $(head -c 60000 /dev/urandom | base64 -w0)"; done |
		shunted redis-cli -p "$P3" > /dev/null 2>> "$WORK/cli3.log"
	R=$(free_port)
	mkdir -p "$WORK/replica-$mode" # (its copy of the master's data: none in the checkout)
	bg "$WORK/replica-$mode.log" env SHUNT_LOG=1 "$SHUNT" run -- redis-server --port "$R" --save '' --appendonly no \
		--dir "$WORK/replica-$mode" \
		--replicaof 127.0.0.1 "$P3"
	wait_port "$R"
	for _ in $(seq 100); do
		redis-cli -p "$R" info replication | grep -q 'master_link_status:up' && break
		sleep 0.1
	done
	redis-cli -p "$R" info replication | grep -q 'master_link_status:up' ||
		die "replica (diskless $mode) never in sync: $(redis-cli -p "$R" info replication | grep sync_ | tr '\r\n' '  ')"
	same "$P3" "$R" || die "replica (diskless $mode) differs from its master"
	grep -q 'connect fd .*: accelerated' "$WORK/replica-$mode.log" || die "replica (diskless $mode) not accelerated"
	redis-cli -p "$R" shutdown nosave > /dev/null 2>&1 || true
done
echo "  replication (from disk after BGSAVE's fork, and diskless): in sync, the same values, accelerated"
echo "redis: ok"
