#!/usr/bin/env bash
# Description: PgBouncer (libevent, session pooling) between pgbench and
# PostgreSQL, all three unmodified and under shunt as the postgres user:
# client and server connections accelerated, every transaction answered.
# Then PgBouncer's online restart (-R) while pgbench runs: the new process
# takes every live client and server connection from the old one by
# SCM_RIGHTS over a unix socket, mid-stream - each connection moves to TCP
# at the exact byte as it is passed, and pgbench sees no failed
# transaction, no reset, and the same data as a plain client; the new
# process's next clients are accelerated again.
# Time limit: 120
. "$(dirname "$0")/lib.sh"
need pgbouncer; need pgbench; need psql; need setpriv
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/postgres" ] || { echo "skip: PostgreSQL is not installed"; exit 77; }
id postgres > /dev/null 2>&1 || { echo "skip: no postgres user"; exit 77; }

# Everything runs as postgres: shunt and its library where that user can
# read them, a private rendezvous directory of that user's.
chmod 755 "$WORK"
mkdir -p "$WORK/bin" "$WORK/data" "$WORK/sock" "$WORK/run" "$WORK/pgdir"
cp "$ROOT/$BUILD/shunt" "$ROOT/$BUILD/libshunt.so" "$WORK/bin/"
chmod 755 "$WORK/bin" "$WORK/bin/"*
chown postgres "$WORK/data" "$WORK/sock" "$WORK/run" "$WORK/pgdir"
chmod 700 "$WORK/pgdir"
export SHUNT_DIR="$WORK/pgdir"
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
pg_shunted() { as_pg env SHUNT_LOG=1 "$WORK/bin/shunt" run -- "$@"; }

D=$(free_port); B=$(free_port)
[ "$D" != "$B" ] || B=$((D + 1))
as_pg "$PGBIN/initdb" -D "$WORK/data" -A trust > "$WORK/initdb.log" 2>&1 || die "initdb: $(tail -5 "$WORK/initdb.log")"
bg "$WORK/pg.log" env -C "$WORK" setpriv --reuid=postgres --regid=postgres --init-groups \
	env SHUNT_LOG=1 "$WORK/bin/shunt" run -- "$PGBIN/postgres" -D "$WORK/data" \
	-c listen_addresses=127.0.0.1 -p "$D" -k "$WORK/sock" -c max_connections=40
wait_port "$D"
for _ in $(seq 50); do as_pg "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$D" && break; sleep 0.1; done
as_pg pgbench -h 127.0.0.1 -p "$D" -i -s 2 -q postgres > "$WORK/init.log" 2>&1 || die "pgbench -i: $(tail -5 "$WORK/init.log")"

echo '"postgres" ""' > "$WORK/users.txt"
cat > "$WORK/pgb.ini" <<CONF
[databases]
postgres = host=127.0.0.1 port=$D dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $B
unix_socket_dir = $WORK/sock
auth_type = trust
auth_file = $WORK/users.txt
pool_mode = session
default_pool_size = 10
logfile = $WORK/run/pgb.log
pidfile = $WORK/run/pgb.pid
; clients of a deferred listener stay plain without the agent (reason 8)
tcp_defer_accept = 0
CONF
chmod 644 "$WORK/pgb.ini" "$WORK/users.txt"
bg "$WORK/old.log" env -C "$WORK" setpriv --reuid=postgres --regid=postgres --init-groups \
	env SHUNT_LOG=1 "$WORK/bin/shunt" run -- pgbouncer "$WORK/pgb.ini"
wait_port "$B"

# what the table holds, read directly and plainly
Q="select md5(string_agg(aid::text || ':' || abalance::text || ':' || filler, ',' order by aid)) from pgbench_accounts"
want=$(as_pg psql -At -h 127.0.0.1 -p "$D" -c "$Q" postgres) || die "psql direct"
[ -n "$want" ] || die "psql direct: no answer"

# 1. pgbench through PgBouncer, all under shunt
pg_shunted pgbench -h 127.0.0.1 -p "$B" -c 4 -j 2 -T 3 -S postgres > "$WORK/b1.log" 2>&1 || die "pgbench: $(tail -5 "$WORK/b1.log")"
grep -q 'number of failed transactions: 0 ' "$WORK/b1.log" || die "pgbench: $(grep -E 'failed|error' "$WORK/b1.log")"
got=$(pg_shunted psql -At -h 127.0.0.1 -p "$B" -c "$Q" postgres 2>> "$WORK/b1.log") || die "psql through pgbouncer"
[ "$got" = "$want" ] || die "the table read through PgBouncer differs: $got vs $want"
expect_accel "$WORK/b1.log" 5
expect_accel "$WORK/old.log" 5

# 2. the online restart while pgbench runs (15 s: the takeover waits for
# each connection's transaction to end)
pg_shunted pgbench -h 127.0.0.1 -p "$B" -c 4 -j 2 -T 8 -S postgres > "$WORK/b2.log" 2>&1 &
bench=$!
sleep 3
grep -q 'accelerated (shm)' "$WORK/b2.log" || die "pgbench's connections are not accelerated: $(cat "$WORK/b2.log")"
bg "$WORK/new.log" env -C "$WORK" setpriv --reuid=postgres --regid=postgres --init-groups \
	env SHUNT_LOG=1 "$WORK/bin/shunt" run -- pgbouncer -R "$WORK/pgb.ini"
wait "$bench" || die "pgbench across the restart: $(grep -E 'error|failed|abort' "$WORK/b2.log" | head -5)"
grep -q 'number of failed transactions: 0 ' "$WORK/b2.log" || die "pgbench across the restart: $(grep -E 'failed|error' "$WORK/b2.log")"
grep -q 'SHOW FDS finished' "$WORK/run/pgb.log" || die "no takeover: $(tail -5 "$WORK/run/pgb.log")"
grep -q 'old process killed, resuming work' "$WORK/run/pgb.log" || die "the new PgBouncer did not take over: $(tail -5 "$WORK/run/pgb.log")"
moved=$(count 'move: fd passed' "$WORK/old.log")
# four pgbench clients and their four server connections
[ "$moved" -ge 8 ] || die "$moved connections moved to TCP as they were passed, expected >= 8: $(grep move "$WORK/old.log")"
grep -E 'reset|lost|corrupt' "$WORK/old.log" "$WORK/new.log" "$WORK/b2.log" && die "a connection was damaged"
echo "  online restart: $moved connections passed, moved to TCP at the byte, 0 failed transactions"

# 3. the new PgBouncer serves new connections: the listener it received is
# registered at its first accept(), so the first client after the hand-over
# found no record and went plain (peer-not-shunt: intact all the same), the
# next are accelerated
for i in 1 2; do
	got=$(pg_shunted psql -At -h 127.0.0.1 -p "$B" -c "$Q" postgres 2> "$WORK/b3-$i.log") ||
		die "psql after the restart: $(cat "$WORK/b3-$i.log")"
	[ "$got" = "$want" ] || die "the table read after the restart differs"
done
grep -E 'connect fd [0-9]+: tcp' "$WORK/b3-1.log" | grep -v peer-not-shunt && die "first client after the restart: plain for another reason"
expect_accel "$WORK/b3-2.log" 1

# 4. a plain client through the shunt-run PgBouncer: plain, intact
got=$(as_pg psql -At -h 127.0.0.1 -p "$B" -c "$Q" postgres) || die "plain psql through pgbouncer"
[ "$got" = "$want" ] || die "a plain client read different data"
echo "pgbouncer: ok"
