#!/usr/bin/env bash
# Description: nginx with `listen ... reuseport` (a socket of the port's
# SO_REUSEPORT group for each of its 2 workers) under shunt: curl's
# connections accelerated.  Then a member of the group that is not under
# shunt (a Python HTTP server bound to the same port, as a server started
# beside nginx would be): every connection is answered by the socket the
# kernel picked - nginx's file or the Python server's text - and each one
# is plain with reason reuseport-foreign, at once (before, each one the
# Python server got waited for a claim: 200 ms, accept-timeout).  The
# plain member gone, accelerated again.
. "$(dirname "$0")/lib.sh"
need nginx; need curl; need python3

P=$(free_port)
workers_share_dir
mkdir -p "$WORK/www" "$WORK/tmp"
echo "from nginx" > "$WORK/www/index.html"
nginx_conf "server { listen 127.0.0.1:$P reuseport; root $WORK/www; }" > "$WORK/nginx.conf"
bg "$WORK/srv.log" env SHUNT_LOG=1 "$SHUNT" run -- nginx -c "$WORK/nginx.conf" -p "$WORK"
wait_port "$P"

fetch() { # N LOG: N connections one after another, each body to $WORK/bodies
	: > "$WORK/bodies"
	for _ in $(seq "$1"); do
		shunted curl -s "http://127.0.0.1:$P/index.html" >> "$WORK/bodies" 2>> "$2" ||
			die "curl failed: $(tail -3 "$2")"
	done
}

fetch 10 "$WORK/cli1.log"
[ "$(grep -c 'from nginx' "$WORK/bodies")" = 10 ] || die "nginx's bodies: $(sort "$WORK/bodies" | uniq -c)"
expect_accel "$WORK/cli1.log" 10

# the plain member: nginx's master made its sockets as root, and a
# SO_REUSEPORT group takes only sockets of the same user
cat > "$WORK/plain.py" <<'PY'
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(64)
open(sys.argv[2], "w").close()
while True:
    c, _ = l.accept()
    c.recv(4096)
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 11\r\n\r\nfrom plain\n")
    c.close()
PY
env -u LD_PRELOAD python3 "$WORK/plain.py" "$P" "$WORK/plain.up" > "$WORK/plain.log" 2>&1 &
plain=$!
PIDS+=("$plain")
for _ in $(seq 100); do [ -e "$WORK/plain.up" ] && break; sleep 0.05; done
[ -e "$WORK/plain.up" ] || die "the plain member did not start: $(cat "$WORK/plain.log")"
sleep 1.1 # (a client's look at the group holds a second)
fetch 30 "$WORK/cli2.log"
nn=$(grep -c 'from nginx' "$WORK/bodies" || true); np=$(grep -c 'from plain' "$WORK/bodies" || true)
[ $((nn + np)) = 30 ] && [ "$nn" -gt 0 ] && [ "$np" -gt 0 ] ||
	die "with the plain member: $nn bodies from nginx, $np from it, of 30"
nr=$(count 'connect fd [0-9]*: tcp, reuseport-foreign' "$WORK/cli2.log")
[ "$nr" = 30 ] || die "with the plain member: $nr of 30 connections plain with reason reuseport-foreign: $(grep 'connect fd' "$WORK/cli2.log" | sort | uniq -c)"
echo "  with a plain member: $nn answered by nginx, $np by it, all plain (reuseport-foreign)"

kill "$plain"
wait "$plain" 2> /dev/null || true
sleep 1.1
fetch 10 "$WORK/cli3.log"
[ "$(grep -c 'from nginx' "$WORK/bodies")" = 10 ] || die "after: $(sort "$WORK/bodies" | uniq -c)"
expect_accel "$WORK/cli3.log" 10
echo "nginx_reuseport: ok"
