#!/usr/bin/env bash
# Description: a forking socat echo server and a socat client move 20 MB
# through shunt unchanged; `shunt ss` shows the live connection as shm;
# a plain socat client against it is plain TCP and also intact.
. "$(dirname "$0")/lib.sh"
need socat

P=$(free_port)
head -c 20000000 /dev/urandom > "$WORK/in.bin"
sum=$(sha256sum < "$WORK/in.bin")
bg "$WORK/srv.log" env SHUNT_LOG=1 "$SHUNT" run -- socat "TCP-LISTEN:$P,reuseaddr,fork" EXEC:cat
wait_port "$P"
got=$(shunted socat -t 5 - "TCP:127.0.0.1:$P" < "$WORK/in.bin" 2>"$WORK/cli.log" | sha256sum)
[ "$got" = "$sum" ] || die "echo through shunt differs"
expect_accel "$WORK/srv.log" 1
expect_accel "$WORK/cli.log" 1

# a connection held open while shunt ss looks at it
(sleep 2) | SHUNT_LOG=1 "$SHUNT" run -- socat - "TCP:127.0.0.1:$P" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 40); do
	"$SHUNT" ss --json > "$WORK/ss.json"
	grep -q '"role": "client", "mode": "shm"' "$WORK/ss.json" &&
		grep -q '"role": "server", "mode": "shm"' "$WORK/ss.json" && break
	sleep 0.05
done
grep -q '"role": "client", "mode": "shm"' "$WORK/ss.json" || die "shunt ss shows no accelerated client: $(cat "$WORK/ss.json")"
grep -q '"role": "server", "mode": "shm"' "$WORK/ss.json" || die "shunt ss shows no accelerated server"
"$SHUNT" ss | grep -q 'shm' || die "shunt ss (text) shows no shm row"

got=$(socat -t 5 - "TCP:127.0.0.1:$P" < "$WORK/in.bin" | sha256sum)
[ "$got" = "$sum" ] || die "plain client echo differs"
echo "socat: ok"
