#!/usr/bin/env bash
# Description: node's cluster module under shunt.  Its master accepts every
# connection and passes it to a worker over an IPC pipe (SCM_RIGHTS,
# round-robin scheduling, the default on Linux); a worker answers.  With
# curl under shunt too, each connection is accelerated when the master
# accepts it and moves to TCP at the exact byte before the pass: 30
# requests spread over the workers, a 5 MB upload and a 5 MB download per
# request are byte-identical, keep-alive requests on one connection all
# answered, and the master's log shows every pass moved (none lost).
# Before issue #13 the workers read nothing and curl got empty replies.
# And ten clients (Python, under shunt) that send a whole request and shut
# down their sending half at once (HTTP/1.0 with a body, as `nc -N` does):
# the master passes such a connection with the request and its end unread,
# and every one must be answered with the body's digest.  Before the
# forty-fifth session the client's FIN had left at its shutdown, the pass
# went ahead without the bytes in the rings ("could not move") and 4 of 10
# got an empty reply.
# Time limit: 180
. "$(dirname "$0")/lib.sh"
need node; need curl; need python3

P=$(free_port)
head -c 5000000 /dev/urandom > "$WORK/big.bin"
sum=$(sha256sum < "$WORK/big.bin" | cut -d' ' -f1)
cat > "$WORK/server.js" <<'EOS'
const cluster = require('cluster'), http = require('http'), crypto = require('crypto');
const fs = require('fs');
cluster.schedulingPolicy = cluster.SCHED_RR;
if (cluster.isPrimary) {
	for (let i = 0; i < 3; i++) cluster.fork();
	let up = 0;
	cluster.on('listening', () => { if (++up === 3) console.log('listening'); });
} else {
	const big = fs.readFileSync(process.env.BIG);
	http.createServer((req, res) => {
		const h = crypto.createHash('sha256');
		req.on('data', (d) => h.update(d));
		req.on('end', () => {
			if (req.url === '/big') {
				res.writeHead(200, { 'Content-Length': big.length });
				res.end(big);
			} else {
				const body = 'pid ' + process.pid + ' ' + h.digest('hex') + '\n';
				res.writeHead(200, { 'Content-Length': Buffer.byteLength(body) });
				res.end(body);
			}
		});
	}).listen(+process.env.PORT, '127.0.0.1');
}
EOS
bg "$WORK/node.log" env SHUNT_LOG=1 BIG="$WORK/big.bin" PORT=$P \
	"$SHUNT" run -- node "$WORK/server.js"
wait_port "$P"

empty=$(printf '' | sha256sum | cut -d' ' -f1)
for i in $(seq 1 30); do
	got=$(shunted curl -s --max-time 20 "http://127.0.0.1:$P/small" 2>>"$WORK/cli.log")
	case "$got" in "pid "*" $empty") ;; *) die "request $i: '$got' $(tail -3 "$WORK/node.log")";; esac
	echo "$got" >> "$WORK/pids"
done
workers=$(cut -d' ' -f2 "$WORK/pids" | sort -u | wc -l)
[ "$workers" -ge 2 ] || die "30 requests reached $workers worker(s)"
for i in 1 2 3; do
	got=$(shunted curl -s --max-time 30 -H 'Expect:' --data-binary @"$WORK/big.bin" "http://127.0.0.1:$P/up" 2>>"$WORK/cli.log")
	[ "${got##* }" = "$sum" ] || die "upload $i: the worker saw '$got'"
	got=$(shunted curl -s --max-time 30 "http://127.0.0.1:$P/big" 2>>"$WORK/cli.log" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$sum" ] || die "download $i: body differs"
done
# keep-alive: five requests on one connection, all answered
n=$(shunted curl -s --max-time 30 $(for i in 1 2 3 4 5; do echo "http://127.0.0.1:$P/k$i"; done) \
	2>>"$WORK/cli.log" | grep -c "^pid ")
[ "$n" -eq 5 ] || die "keep-alive: $n of 5 answered"
# half-closed clients: the request and its end wait in the rings at the pass
cat > "$WORK/half.py" <<'EOS'
import socket, sys, hashlib, os
port, bad = int(sys.argv[1]), 0
for i in range(10):
    body = os.urandom(1000 + 997 * i)
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'POST /h HTTP/1.0\r\nContent-Length: %d\r\n\r\n' % len(body) + body)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(20)
    got = b''
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    s.close()
    if hashlib.sha256(body).hexdigest().encode() not in got:
        bad += 1
        print("half-closed request %d: %r" % (i, got[-100:]))
sys.exit(bad)
EOS
shunted python3 "$WORK/half.py" "$P" 2>>"$WORK/cli.log" || die "half-closed clients: $? of 10 not answered right"
# every connection was accelerated at the master's accept, and moved before its pass
acc=$(count "accept fd [0-9]*: shm" "$WORK/node.log")
moved=$(count "move: fd passed" "$WORK/node.log")
[ "$acc" -ge 47 ] || die "only $acc accelerated accepts in the master (47 connections)"
[ "$moved" -eq "$acc" ] || die "$acc accelerated accepts, $moved moved before the pass"
! grep -q "could not move" "$WORK/node.log" || die "$(grep "could not move" "$WORK/node.log")"
grep -q "peer moved it to TCP (fd-passed)" "$WORK/cli.log" || die "no client saw the move"
echo "node cluster: 47 connections (10 half-closed), $workers workers, $acc accelerated then moved at the pass"
