#!/usr/bin/env bash
# Description: xinetd, an inetd that forks and execs a service for each
# connection with the connection on descriptors 0-2 and an environment of
# its own (only what a service's passenv names), running /bin/cat as an
# echo service; Python clients, all under shunt.  Small requests (100 KB)
# stay accelerated end to end: cat inherits the connection across exec and
# loads shunt again.  Large ones (3 MB), which the client writes whole
# before it reads the echo, fill both rings while both ends write: the
# connection moves to TCP at the exact byte (rings-full) and finishes
# there, as TCP's larger buffers let it - before, it hung for good.  Every
# byte checked.
# Time limit: 120
. "$(dirname "$0")/lib.sh"
need xinetd; need python3
P=$(free_port)
cat > "$WORK/xinetd.conf" <<CONF
defaults
{
}
service shuntecho
{
	type = UNLISTED
	port = $P
	socket_type = stream
	protocol = tcp
	wait = no
	user = root
	server = /bin/cat
	bind = 127.0.0.1
	instances = 50
	per_source = UNLIMITED
	cps = 1000 1
}
CONF
cat > "$WORK/client.py" <<'PY'
import socket, sys
port, n, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    data = bytes((j * 7 + i) & 255 for j in range(65536)) * (size // 65536 + 1)
    data = data[:size]
    c = socket.create_connection(('127.0.0.1', port))
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    got = bytearray()
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        got += b
    c.close()
    if got != data:
        sys.exit("connection %d: %d bytes back of %d, or different" % (i, len(got), size))
PY
SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/server.log" "$SHUNT" run -- xinetd -dontfork -f "$WORK/xinetd.conf" \
	-pidfile "$WORK/xinetd.pid" > "$WORK/xinetd.out" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null; cleanup' EXIT
wait_port "$P"
SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/small.log" timeout 30 "$SHUNT" run -- python3 "$WORK/client.py" "$P" 3 100000 ||
	die "100 KB echoes: $(cat "$WORK/small.log")"
n=$(count "accelerated (shm)" "$WORK/small.log")
[ "$n" -eq 3 ] && ! grep -q "move" "$WORK/small.log" ||
	die "100 KB echoes: $n of 3 accelerated, or moved: $(cat "$WORK/small.log")"
echo "xinetd + cat: 3 echoes of 100 KB intact, accelerated end to end"
SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/large.log" timeout 60 "$SHUNT" run -- python3 "$WORK/client.py" "$P" 3 3000000 ||
	die "3 MB echoes: $(cat "$WORK/large.log")"
m=$(count "rings-full: connection" "$WORK/large.log")
[ "$m" -eq 3 ] || die "3 MB echoes: $m of 3 moved for full rings: $(cat "$WORK/large.log")"
grep -q "broke" "$WORK/server.log" && die "a service saw a broken ring: $(cat "$WORK/server.log")"
echo "xinetd + cat: 3 echoes of 3 MB intact, each moved to TCP once both rings were full (rings-full)"
