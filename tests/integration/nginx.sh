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
