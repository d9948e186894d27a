#!/usr/bin/env bash
# Description: a Python server under shunt hands each accepted connection
# to a real program as its stdin and stdout - subprocess.run(cmd,
# stdin=conn, stdout=conn), keeping its own copy - and the programs
# (sha256sum, wc -c) read and answer through C stdio.  Clients under
# shunt and plain send requests of 1,000, 100,000 and 3,000,000 bytes
# and shut their sending side at once, before the program starts: the
# answers are checked against hashlib's and the lengths.  Under shunt the
# program's first stdio call moves the connection to TCP (reason stdio);
# a small request is already in the rings then, and the client, having
# shut its side, cannot resend it: the move holds it for the program's
# reads.  Before, the program read an empty request and the client's read
# failed with ECONNRESET.
# Time limit: 120
. "$(dirname "$0")/lib.sh"
need python3
need sha256sum
cat > "$WORK/server.py" <<'EOS'
import socket, subprocess, sys, time
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1])))
l.listen(16)
while True:
    c, _ = l.accept()
    cmd = c.recv(1)  # which program: the request's first byte
    time.sleep(0.2)  # the rest of a small request, and the client's FIN, arrive first
    subprocess.run(["sha256sum"] if cmd == b"s" else ["wc", "-c"], stdin=c, stdout=c)
    c.close()
EOS
cat > "$WORK/client.py" <<'EOS'
import hashlib, socket, sys
port, n, prog = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
data = bytes((i * 7 + n) % 251 for i in range(n))
s = socket.create_connection(("127.0.0.1", port))
s.sendall(prog.encode() + data)
s.shutdown(socket.SHUT_WR)
out = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
want = hashlib.sha256(data).hexdigest() if prog == "s" else str(n)
got = out.split()[0].decode() if out.split() else ""
if got != want:
    sys.exit(f"{n} bytes through {prog}: got {out!r}, wanted {want}")
EOS
P=$(free_port)
bg "$WORK/server.log" env SHUNT_LOG=1 "$SHUNT" run -- python3 "$WORK/server.py" "$P"
wait_port "$P"
k=0
for n in 1000 100000 3000000; do
	for prog in s w; do
		shunted python3 "$WORK/client.py" "$P" "$n" "$prog" 2>> "$WORK/cli.log" ||
			die "under shunt, $n bytes through $prog: $(tail -2 "$WORK/cli.log")"
		python3 "$WORK/client.py" "$P" "$n" "$prog" 2>> "$WORK/plain.log" ||
			die "plain, $n bytes through $prog: $(tail -2 "$WORK/plain.log")"
		k=$((k + 1))
	done
done
expect_accel "$WORK/cli.log" "$k"
n=$(count 'the peer moved it to TCP (stdio)' "$WORK/cli.log")
[ "$n" = "$k" ] || die "$n of $k connections under shunt saw the server's program move it (reason stdio)"
! grep -q 'broke its shared ring\|could not move' "$WORK/cli.log" "$WORK/server.log" || die "a move failed or a ring broke"
echo "python subprocess: $k requests under shunt (moved to TCP at the program's stdio) and $k plain, all answered right"
