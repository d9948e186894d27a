#!/usr/bin/env bash
# Description: nginx as a reverse proxy (proxy_pass) to a backend nginx,
# both under shunt: the proxy's upstream sockets go into its epoll set
# before their connect() (tests/behave/epoll_before_connect), and kept
# alive (upstream keepalive) they carry request after request.  Bodies
# through the proxy are byte-identical, both hops accelerated; then the
# same with the backend plain (the upstream hop stays TCP, intact).
. "$(dirname "$0")/lib.sh"
need nginx; need curl

P=$(free_port); B=$(free_port)
[ "$P" != "$B" ] || B=$((P + 1))
workers_share_dir
mkdir -p "$WORK/www" "$WORK/tmp" "$WORK/b/tmp"
head -c 2000000 /dev/urandom > "$WORK/www/big.bin"
sum=$(sha256sum < "$WORK/www/big.bin")
nginx_conf "upstream back { server 127.0.0.1:$B; keepalive 8; }
	server { listen 127.0.0.1:$P;
		location / { proxy_pass http://back; proxy_http_version 1.1;
			     proxy_set_header Connection \"\"; proxy_buffering off; } }" > "$WORK/nginx.conf"
(WORK="$WORK/b"; nginx_conf "sendfile on; server { listen 127.0.0.1:$B; root $WORK/../www; }") > "$WORK/b/nginx.conf"
bg "$WORK/back.log" env SHUNT_LOG=1 "$SHUNT" run -- nginx -c "$WORK/b/nginx.conf" -p "$WORK/b"
wait_port "$B"
bg "$WORK/proxy.log" env SHUNT_LOG=1 "$SHUNT" run -- nginx -c "$WORK/nginx.conf" -p "$WORK"
wait_port "$P"

for i in $(seq 20); do
	got=$(curl -s "http://127.0.0.1:$P/big.bin" | sha256sum)
	[ "$got" = "$sum" ] || die "round $i: the body through the proxy differs"
done
# the proxy's upstream connections (its error.log has its decisions)
up=$(grep -cE 'connect fd [0-9]+: accelerated \(shm\)' "$WORK/error.log" || true)
plain=$(grep -E 'connect fd [0-9]+: tcp' "$WORK/error.log" | head -3)
[ "$up" -ge 1 ] || die "no upstream connection accelerated: $(tail -5 "$WORK/error.log")"
[ -z "$plain" ] || die "plain upstream connections: $plain"
[ "$up" -le 4 ] || die "$up upstream connections for 20 requests: keepalive not kept"
expect_accel "$WORK/b/error.log" "$up"
echo "  proxy: 20 requests over $up kept-alive upstream connections, accelerated"

# the backend plain: the upstream hop is TCP, bodies intact
kill "$(cat "$WORK/b/nginx.pid")"; sleep 0.5
bg "$WORK/back2.log" nginx -c "$WORK/b/nginx.conf" -p "$WORK/b"
wait_port "$B"
for i in $(seq 5); do
	got=$(curl -s "http://127.0.0.1:$P/big.bin" | sha256sum)
	[ "$got" = "$sum" ] || die "round $i with a plain backend: the body differs"
done
grep -qE 'connect fd [0-9]+: tcp, peer-not-shunt' "$WORK/error.log" || die "no plain upstream connection logged"
echo "nginx_proxy: ok"
