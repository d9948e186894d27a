#!/usr/bin/env bash
# Description: nginx (master + 2 workers, epoll, sendfile) serving files to
# curl and wrk, unmodified: bodies are byte-identical and connections are
# accelerated with shunt on both sides (under wrk's load, up to one in
# twenty plain with reason server-first: a non-blocking accept() that came
# before its client's offer), plain with shunt on one side.
. "$(dirname "$0")/lib.sh"
need nginx; need curl

P=$(free_port)
# nginx's workers drop to www-data
workers_share_dir
mkdir -p "$WORK/www" "$WORK/tmp"
head -c 3000000 /dev/urandom > "$WORK/www/big.bin"
echo hello > "$WORK/www/index.html"
sum=$(sha256sum < "$WORK/www/big.bin")
nginx_conf "sendfile on; server { listen 127.0.0.1:$P; root $WORK/www; }" > "$WORK/nginx.conf"
bg "$WORK/srv.log" env SHUNT_LOG=1 "$SHUNT" run -- nginx -c "$WORK/nginx.conf" -p "$WORK"
wait_port "$P"

for i in $(seq 10); do
	got=$(shunted curl -s "http://127.0.0.1:$P/big.bin" 2>>"$WORK/cli.log" | sha256sum)
	[ "$got" = "$sum" ] || die "curl under shunt: body differs (round $i)"
done
# nginx points its stderr at error_log: shunt's decisions land there.
expect_accel "$WORK/error.log" 10
expect_accel "$WORK/cli.log" 10
# One client process, ten connections one after another (each closed by
# the server after its answer): across users in a shared directory, the
# worker's answers after the first (which brings the client an arena) go
# in the offer slot, checked by the client against the user who sent it
# that arena (since the fortieth session: before, each one was a message
# and a wait for the client's word)
ns=$(wc -l < "$WORK/error.log"); nc=$(wc -l < "$WORK/cli.log")
urls=$(for _ in $(seq 10); do printf 'http://127.0.0.1:%s/big.bin ' "$P"; done)
got=$(shunted curl -s -H 'Connection: close' $urls 2>>"$WORK/cli.log" | sha256sum)
[ "$got" = "$(for _ in $(seq 10); do cat "$WORK/www/big.bin"; done | sha256sum)" ] ||
	die "curl, ten connections in one process: bodies differ"
tail -n +$((ns + 1)) "$WORK/error.log" > "$WORK/srv-seq.log"
tail -n +$((nc + 1)) "$WORK/cli.log" > "$WORK/cli-seq.log"
expect_accel "$WORK/srv-seq.log" 10
expect_accel "$WORK/cli-seq.log" 10
inslot=$(count 'answered in the offer slot' "$WORK/srv-seq.log")
[ "$inslot" -ge 8 ] || die "answers in the offer slot across users: $inslot of 10: $(grep answered "$WORK/srv-seq.log")"
if command -v wrk >/dev/null; then
	# (nginx ends a connection after 1,000 requests: wrk reconnects
	# under load, both CPUs busy)
	ns=$(wc -l < "$WORK/error.log"); nc=$(wc -l < "$WORK/cli.log")
	shunted wrk -t1 -c10 -d2 "http://127.0.0.1:$P/index.html" >"$WORK/wrk.txt" 2>>"$WORK/cli.log"
	grep -q 'Requests/sec' "$WORK/wrk.txt" || die "wrk failed: $(cat "$WORK/wrk.txt")"
	! grep -q 'Non-2xx' "$WORK/wrk.txt" || die "wrk saw errors"
	tail -n +$((ns + 1)) "$WORK/error.log" > "$WORK/srv-wrk.log"
	tail -n +$((nc + 1)) "$WORK/cli.log" > "$WORK/cli-wrk.log"
	expect_accel_busy "$WORK/srv-wrk.log" "$WORK/cli-wrk.log" 10
fi

got=$(curl -s "http://127.0.0.1:$P/big.bin" | sha256sum)
[ "$got" = "$sum" ] || die "plain curl: body differs"
grep 'accept fd' "$WORK/error.log" | tail -n 1 > "$WORK/srv-plain.log"
expect_plain "$WORK/srv-plain.log"
echo "nginx: ok"
