#!/usr/bin/env bash
# Description: haproxy relaying with splice() (`option splice-request`,
# `option splice-response`, as many deployments configure it) between curl
# and a socat HTTP backend, all three under shunt: every body byte-identical
# both ways (a 5 MB download and a 5 MB upload), both hops accelerated, and
# haproxy really spliced (its own counters say so).  Before issue #13 the
# replies came back empty.
# Time limit: 120
. "$(dirname "$0")/lib.sh"
need haproxy; need curl; need socat

P=$(free_port); B=$(free_port); S=$(free_port)
head -c 5000000 /dev/urandom > "$WORK/big.bin"
sum=$(sha256sum < "$WORK/big.bin" | cut -d' ' -f1)
# the backend: a fixed reply to any request, and the upload's checksum
cat > "$WORK/backend.sh" <<EOS
#!/bin/sh
# one HTTP exchange on stdin/stdout
len=0
while IFS= read -r line; do
	line=\$(printf '%s' "\$line" | tr -d '\r')
	[ -z "\$line" ] && break
	case "\$line" in Content-Length:*|content-length:*) len=\${line#*: };; esac
done
if [ "\$len" -gt 0 ]; then
	s=\$(head -c "\$len" | sha256sum | cut -d' ' -f1)
	printf 'HTTP/1.1 200 OK\r\nContent-Length: 64\r\nConnection: close\r\n\r\n%s' "\$s"
else
	printf 'HTTP/1.1 200 OK\r\nContent-Length: $(stat -c %s "$WORK/big.bin")\r\nConnection: close\r\n\r\n'
	cat "$WORK/big.bin"
fi
EOS
chmod +x "$WORK/backend.sh"
cat > "$WORK/haproxy.cfg" <<EOC
global
	maxconn 100
	stats socket $WORK/haproxy.sock level admin
defaults
	mode http
	timeout connect 5s
	timeout client 20s
	timeout server 20s
	option splice-request
	option splice-response
	option http-server-close
frontend f
	bind 127.0.0.1:$P
	default_backend b
backend b
	server s1 127.0.0.1:$B
EOC
bg "$WORK/backend.log" env SHUNT_LOG=1 "$SHUNT" run -- socat "TCP-LISTEN:$B,reuseaddr,fork" EXEC:"$WORK/backend.sh"
bg "$WORK/haproxy.log" env SHUNT_LOG=1 "$SHUNT" run -- haproxy -db -f "$WORK/haproxy.cfg"
wait_port "$B"; wait_port "$P"

for i in 1 2 3; do
	got=$(shunted curl -s --max-time 20 "http://127.0.0.1:$P/big.bin" 2>>"$WORK/cli.log" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$sum" ] || die "download $i through haproxy: body differs ($(shunted curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$P/" 2>/dev/null) bytes) $(tail -3 "$WORK/haproxy.log")"
	got=$(shunted curl -s --max-time 20 -H 'Expect:' --data-binary @"$WORK/big.bin" "http://127.0.0.1:$P/up" 2>>"$WORK/cli.log")
	[ "$got" = "$sum" ] || die "upload $i through haproxy: the backend saw '$got'"
done
expect_accel "$WORK/cli.log" 6
n=$(grep -c 'accept fd [0-9]*: shm\|accelerated (shm)' "$WORK/haproxy.log")
[ "$n" -ge 12 ] || die "haproxy: $n accelerated hops, expected 12: $(grep -E 'fd [0-9]+' "$WORK/haproxy.log" | head -5)"
# haproxy's own count (its field is spelt TotalSplicdedBytesOut in 2.6)
spliced=$(echo "show info" | socat - "UNIX-CONNECT:$WORK/haproxy.sock" | sed -n 's/^TotalSplic[a-z]*BytesOut: *//p')
[ "${spliced:-0}" -gt 10000000 ] || die "haproxy spliced ${spliced:-no} bytes: splice() was not used"
echo "  haproxy spliced $spliced bytes"
# plain curl through the shunt haproxy: plain on that hop, intact
got=$(curl -s --max-time 20 "http://127.0.0.1:$P/big.bin" | sha256sum | cut -d' ' -f1)
[ "$got" = "$sum" ] || die "plain curl through haproxy: body differs"
echo "haproxy (splice): ok"
