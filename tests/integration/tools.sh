#!/usr/bin/env bash
# Description: the shunt command as users meet it: `shunt run` works from
# any directory and passes the exit status through (127 for a missing
# program); a bad SHUNT_* value warns and keeps the default; SHUNT_DISABLE=1
# and SHUNT_PORTS make connections plain with reason policy; `shunt ss`
# filters by pid and its --json parses.
. "$(dirname "$0")/lib.sh"
PEER="$ROOT/$BUILD/tests/tools/peer"

cd / || die "cd /"
"$SHUNT" run -- sh -c 'exit 7'; rc=$?
[ $rc = 7 ] || die "exit status $rc, expected 7"
"$SHUNT" run -- /nonexistent/program 2>/dev/null; rc=$?
[ $rc = 127 ] || die "missing program: $rc, expected 127"
out=$(SHUNT_RING_KB=abc "$SHUNT" run -- true 2>&1)
echo "$out" | grep -q 'invalid SHUNT_RING_KB: its safe default applies' || die "no warning for a bad value: $out"
echo "  run: exit status, missing program, bad configuration value"

pair() { # env... -> client line
	local P; P=$(free_port)
	: > "$WORK/s.out" # a stale "listening" must not start the client
	env "$@" "$SHUNT" run -- "$PEER" server 127.0.0.1 "$P" cfirst > "$WORK/s.out" 2>&1 &
	local s=$!
	for _ in $(seq 100); do grep -q listening "$WORK/s.out" && break; sleep 0.02; done
	env "$@" "$SHUNT" run -- "$PEER" client 127.0.0.1 "$P" cfirst || die "client failed"
	wait $s || die "server failed"
}
pair SHUNT_X=1 | grep -q 'mode=shm' || die "default not accelerated"
pair SHUNT_DISABLE=1 | grep -q 'mode=tcp reason=2' || die "SHUNT_DISABLE=1 is not plain/policy"
pair SHUNT_PORTS=1 | grep -q 'mode=tcp reason=2' || die "SHUNT_PORTS excluding the port is not plain/policy"
echo "  policy: SHUNT_DISABLE and SHUNT_PORTS give plain TCP, reason policy"

P=$(free_port)
"$SHUNT" run -- socat "TCP-LISTEN:$P,reuseaddr" - < /dev/null > /dev/null 2>&1 &
srv=$!; PIDS+=($srv)
wait_port "$P"
"$SHUNT" ss --json > "$WORK/ss.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert isinstance(d, list)' "$WORK/ss.json" || die "ss --json is not JSON"
socat_pid=$(pgrep -n -f "TCP-LISTEN:$P") || die "no socat"
"$SHUNT" ss -p "$socat_pid" | grep -q "$P" || die "ss -p does not list the listener"
[ "$("$SHUNT" ss -p 1 | wc -l)" = 1 ] || die "ss -p 1 lists another process's sockets"
echo "  ss: --json parses, -p filters"

# A process's stats file exists a moment before its lock: `shunt ss` must
# not take it for a dead process's then (its connections went unlisted,
# its message socket removed) - a file without a lock is reaped only once
# it is older than that moment.
young="$SHUNT_DIR/s00000000deadbeef"
head -c 64 /dev/zero > "$young"; : > "$SHUNT_DIR/c00000000deadbeef"
"$SHUNT" ss > /dev/null
[ -e "$young" ] && [ -e "$SHUNT_DIR/c00000000deadbeef" ] || die "ss reaped a file made a moment ago"
sleep 2.2
"$SHUNT" ss > /dev/null
[ ! -e "$young" ] && [ ! -e "$SHUNT_DIR/c00000000deadbeef" ] || die "ss left a dead process's files"
echo "  ss: a dead process's files reaped, a new one's not"

# A connection whose last holder was a program exec'd by a child of the
# server (close-on-exec: the exec ends it) is over once the client read
# its EOF: its record, in the server's file, is not listed (it was, until
# the server ended).
P=$(free_port)
cat > "$WORK/execsrv.py" << 'PY'
import os, socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('127.0.0.1', int(sys.argv[1]))); l.listen(); print('listening', flush=True)
c, _ = l.accept(); c.recv(10)
if os.fork() == 0:
    time.sleep(0.2); os.execv('/bin/sleep', ['sleep', '5'])
c.sendall(b'reply'); c.close()
time.sleep(30)
PY
"$SHUNT" run -- python3 "$WORK/execsrv.py" "$P" > "$WORK/execsrv.out" 2>&1 &
srv=$!; PIDS+=($srv)
for _ in $(seq 100); do grep -q listening "$WORK/execsrv.out" && break; sleep 0.05; done
got=$("$SHUNT" run -- python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(b"hi"); d = b""
while True:
    b = s.recv(100)
    if not b: break
    d += b
print(d.decode())' "$P") || die "exec'd holder: the client failed"
[ "$got" = reply ] || die "exec'd holder: the client read '$got'"
pypid=$(pgrep -n -f "execsrv.py $P") || die "no server"
"$SHUNT" ss -p "$pypid" | grep -q "server .*127.0.0.1:$P " &&
	die "ss lists a connection that ended: $("$SHUNT" ss -p "$pypid")"
"$SHUNT" ss -p "$pypid" | grep -q "listen .*:$P" || die "ss lost the listener: $("$SHUNT" ss -p "$pypid")"
pkill -P "$pypid" 2> /dev/null; kill "$srv" 2> /dev/null
echo "  ss: a connection ended by an exec'd holder is not listed"
# A forking server's child that keeps the listener open and serves the
# connection it was born with (Python's ForkingMixIn) makes no file of its
# own - its parent lists both (before, it made one for the listener: 13
# system calls and a file made and removed a connection); a child that
# accepts on the inherited listener itself (a pre-fork worker) lists the
# listener and its connection under its own pid.
P=$(free_port)
cat > "$WORK/forksrv.py" << 'PY'
import os, socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('127.0.0.1', int(sys.argv[1]))); l.listen(); print('listening', flush=True)
c, _ = l.accept()
if os.fork() == 0:
    c.sendall(c.recv(10)); print('child', os.getpid(), flush=True); time.sleep(4); os._exit(0)
c.close()
if os.fork() == 0:
    c, _ = l.accept(); c.sendall(c.recv(10)); print('worker', os.getpid(), flush=True)
    time.sleep(4); os._exit(0)
time.sleep(30)
PY
echo_once() { "$SHUNT" run -- python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(b"ping"); print(s.recv(10).decode())' "$P"; }
SHUNT_LOG=1 "$SHUNT" run -- python3 "$WORK/forksrv.py" "$P" > "$WORK/forksrv.out" 2>&1 &
srv=$!; PIDS+=($srv)
for _ in $(seq 100); do grep -q listening "$WORK/forksrv.out" && break; sleep 0.05; done
[ "$(echo_once)" = ping ] || die "forking server: no echo"
for _ in $(seq 100); do grep -q '^child' "$WORK/forksrv.out" && break; sleep 0.05; done
child=$(awk '/^child/{print $2}' "$WORK/forksrv.out")
[ -n "$child" ] || die "forking server: no child: $(cat "$WORK/forksrv.out")"
grep -q 'accept fd [0-9]*: shm' "$WORK/forksrv.out" || die "forking server: not accelerated: $(cat "$WORK/forksrv.out")"
[ "$("$SHUNT" ss -p "$child" | wc -l)" = 1 ] || die "the child lists sockets of its own: $("$SHUNT" ss -p "$child")"
"$SHUNT" ss | grep -q "listen .*:$P" || die "the listener is not listed: $("$SHUNT" ss)"
[ "$(echo_once)" = ping ] || die "pre-fork worker: no echo"
for _ in $(seq 100); do grep -q '^worker' "$WORK/forksrv.out" && break; sleep 0.05; done
worker=$(awk '/^worker/{print $2}' "$WORK/forksrv.out")
[ -n "$worker" ] || die "pre-fork worker: none: $(cat "$WORK/forksrv.out")"
"$SHUNT" ss -p "$worker" | grep -q "listen .*:$P" || die "the worker does not list the listener: $("$SHUNT" ss -p "$worker")"
pkill -P "$srv" 2> /dev/null; kill "$srv" 2> /dev/null
echo "  ss: a forked child serving its connection makes no file; a worker accepting lists the listener"
# The same with plain clients (not under shunt: peer-not-shunt): the child
# makes no file for its plain connection either (it made one, and removed
# it as it ended: 0.55x TCP's rate for such a server, `setup-floor ...
# fork` with connections kept plain) - its maker's file lists it while the
# child serves it, and the record is freed once both let go: by the
# child's close, or by its exit with the socket open, either first.
P=$(free_port)
cat > "$WORK/forkplain.py" << 'PY'
import os, socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('127.0.0.1', int(sys.argv[1]))); l.listen(); print('listening', os.getpid(), flush=True)
for i in range(3):
    c, _ = l.accept()
    if os.fork() == 0:
        c.sendall(c.recv(10)); print('child', os.getpid(), flush=True); time.sleep(1.5)
        if i == 1: c.close()
        os._exit(0) if i < 2 else sys.exit(0)
    if i == 2: time.sleep(0.5) # the child lets go first
    c.close()
    while os.waitpid(-1, 0)[0] <= 0: pass
    print('reaped', i, flush=True)
time.sleep(30)
PY
plain_once() { python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(b"ping"); print(s.recv(10).decode()); s.recv(10)' "$P"; }
used_records() { # pid: the records in use in its file
	python3 - "$SHUNT_DIR" "$1" << 'PY'
import os, struct, sys
for n in os.listdir(sys.argv[1]):
    if not n.startswith('s'): continue
    b = open(os.path.join(sys.argv[1], n), 'rb').read()
    if len(b) < 32 or struct.unpack_from('<I', b, 8)[0] != int(sys.argv[2]): continue
    print(sum(1 for i in range(struct.unpack_from('<I', b, 12)[0]) if struct.unpack_from('<I', b, 32 + 72 * i)[0] == 1))
PY
}
"$SHUNT" run -- python3 "$WORK/forkplain.py" "$P" > "$WORK/forkplain.out" 2>&1 &
srv=$!; PIDS+=($srv)
for _ in $(seq 100); do grep -q listening "$WORK/forkplain.out" && break; sleep 0.05; done
maker=$(awk '/^listening/{print $2}' "$WORK/forkplain.out")
for i in 0 1 2; do
	plain_once > "$WORK/plain.$i" &
	for _ in $(seq 100); do [ "$(grep -c '^child' "$WORK/forkplain.out")" -gt $i ] && break; sleep 0.05; done
	child=$(awk '/^child/{c=$2} END{print c}' "$WORK/forkplain.out")
	[ -n "$child" ] || die "plain forking server: no child: $(cat "$WORK/forkplain.out")"
	[ "$("$SHUNT" ss -p "$child" | wc -l)" = 1 ] || die "the child made a file for its plain connection: $("$SHUNT" ss -p "$child")"
	sleep 0.6 # (the maker closed its copy: i 0, 1)
	"$SHUNT" ss -p "$maker" | grep -q " server .*127.0.0.1:$P .*peer-not-shunt" ||
		die "connection $i, served by a child, is not listed: $("$SHUNT" ss)"
	for _ in $(seq 100); do grep -q "^reaped $i" "$WORK/forkplain.out" && break; sleep 0.05; done
	grep -q "^reaped $i" "$WORK/forkplain.out" || die "child $i: not reaped: $(cat "$WORK/forkplain.out")"
	wait $! 2> /dev/null
	[ "$(cat "$WORK/plain.$i")" = ping ] || die "plain forking server: no echo ($i)"
	n=$(used_records "$maker")
	[ "$n" = 1 ] || die "connection $i: $n records in use in the maker's file after the child's end (the listener's only: 1)"
done
pkill -P "$srv" 2> /dev/null; kill "$srv" 2> /dev/null
echo "  ss: a forked child serving a plain connection makes no file, its maker lists it, the record goes with both"
echo "tools: ok"
