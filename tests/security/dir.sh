#!/usr/bin/env bash
# Description: attack #1 of issue #12 - the rendezvous directory.  Another
# user pre-creates the victim's default directory (world-writable, or as a
# symlink to one of theirs): the victim's shim refuses it, says so once,
# and its connections stay plain TCP with reason unsafe-dir (19), data
# intact, nothing written into the attacker's directory; with a per-user
# runtime directory the victim is accelerated there instead.  A shared
# SHUNT_DIR must be sticky.  In a shared sticky directory, a member posing
# as the listener of a plain server's port (tests/tools/fakelisten) claims
# the victim's offers, but the victim refuses its accept message (or its
# answer in the offer slot): plain, reason 4, the real server gets every
# byte, nothing reaches the attacker; nor does a member that served the
# victim once and planted an arena under the id of its server's, or
# answers in the slot with its own arena; a member's offer for another
# user's connection is refused by the server (tests/tools/fakeoffer);
# a real server whose worker runs as another user than its listener's
# owns the sockets it accepts and is accelerated; one that changes its user
# before it listens says why it cannot be, unless the directory is shared,
# nor between two connections of one client (its arena sent again).
. "$(dirname "$0")/lib.sh"
PEER="$BIN/peer"
V=shunt-victim A=shunt-attacker

# 1a. a world-writable directory under the victim's default name
rm -rf /tmp/shunt-"$VUID" /run/user/"$VUID"
run_as $A mkdir -m 0777 /tmp/shunt-"$VUID"
run_as $A chmod 0777 /tmp/shunt-"$VUID"
out=$(pair ww)
[ "$(grep -c 'mode=tcp reason=19' <<< "$out")" = 2 ] || die "pre-created directory used: $out"
grep -q "rendezvous directory refused: /tmp/shunt-$VUID is owned by uid $AUID" "$WORK/ww.err" ||
	die "no warning: $(cat "$WORK/ww.err")"
[ "$(grep -c 'refused' "$WORK/ww.err")" = 2 ] || die "one warning per process expected: $(cat "$WORK/ww.err")"
[ -z "$(ls -A /tmp/shunt-"$VUID")" ] || die "the victim wrote into the attacker's directory: $(ls -A /tmp/shunt-"$VUID")"
echo "  attacker's world-writable /tmp/shunt-<victim>: refused, plain (unsafe-dir), one warning per process"

# 1b. a symlink to the attacker's own directory
rm -rf /tmp/shunt-"$VUID"; mkdir -p "$WORK/evil"; chown $A "$WORK/evil"; chmod 0777 "$WORK/evil"
run_as $A ln -s "$WORK/evil" /tmp/shunt-"$VUID" 2>/dev/null || ln -s "$WORK/evil" /tmp/shunt-"$VUID"
out=$(pair link)
[ "$(grep -c 'mode=tcp reason=19' <<< "$out")" = 2 ] || die "symlinked directory used: $out"
grep -q 'a symlink or not a directory' "$WORK/link.err" || die "no warning: $(cat "$WORK/link.err")"
[ -z "$(ls -A "$WORK/evil")" ] || die "the victim wrote through the symlink"
echo "  a symlink in its place: refused the same way"

# 1c. with a per-user runtime directory, the victim is accelerated there
mkdir -p /run/user/"$VUID"; chown $V:$V /run/user/"$VUID"; chmod 0700 /run/user/"$VUID"
out=$(pair run)
[ "$(grep -c 'mode=shm reason=0' <<< "$out")" = 2 ] || die "fallback directory not used: $out"
grep -q "using /run/user/$VUID/shunt instead" "$WORK/run.err" || die "no notice: $(cat "$WORK/run.err")"
rm -rf /tmp/shunt-"$VUID" /run/user/"$VUID"
echo "  /run/user/<victim> present: accelerated in /run/user/<victim>/shunt instead, with a notice"

# 1d. the victim's own private default: accelerated, 0700, owned by it
out=$(pair own)
[ "$(grep -c 'mode=shm reason=0' <<< "$out")" = 2 ] || die "own directory: $out"
[ "$(stat -c '%U %a' /tmp/shunt-"$VUID")" = "$V 700" ] || die "own directory: $(stat -c '%U %a' /tmp/shunt-"$VUID")"

# 1e. a configured shared directory must be sticky
shared="$WORK/shared"; mkdir -m 0777 "$shared"; chmod 0777 "$WORK"
chmod 0711 "$WORK"
out=$(pair nosticky SHUNT_DIR="$shared")
[ "$(grep -c 'mode=tcp reason=19' <<< "$out")" = 2 ] || die "non-sticky shared directory used: $out"
grep -q 'must be sticky' "$WORK/nosticky.err" || die "no warning: $(cat "$WORK/nosticky.err")"
chmod 1777 "$shared"
out=$(pair sticky SHUNT_DIR="$shared")
[ "$(grep -c 'mode=shm reason=0' <<< "$out")" = 2 ] || die "sticky shared directory: $out"
echo "  SHUNT_DIR shared: refused unless sticky (1777 accepted)"

# 1f. a member of the shared directory poses as the listener of a plain
# server's port (fakelisten MODE: it answers by message, in the slot, or
# writes a state of its own): the victim's client refuses it, at once,
# plain (reason 4), and the real server gets every byte.
# hijack NAME [MODE]: prints the victim's wait in ms
hijack() {
	local name=$1 P sp fp t0; shift; P=$(free_port)
	run_as $V "$PEER" server 127.0.0.1 "$P" cfirst > "$WORK/$name.s" 2>&1 &
	sp=$!
	wait_port "$P"
	run_as $A env SHUNT_DIR="$shared" "$BIN/fakelisten" "$shared" "$P" 4 "$@" > "$WORK/$name.fake" 2>&1 &
	fp=$!
	for _ in $(seq 100); do grep -q 'fake listener' "$WORK/$name.fake" && break; sleep 0.05; done
	t0=$(date +%s%N)
	preload $V "$LIBV" SHUNT_DIR="$shared" timeout 3 "$PEER" client 127.0.0.1 "$P" cfirst > "$WORK/$name.c" 2> "$WORK/$name.err" ||
		die "victim client ($name): $(cat "$WORK/$name.c" "$WORK/$name.err")"
	echo $(( ($(date +%s%N) - t0) / 1000000 ))
	wait "$sp" || die "the plain server did not get its bytes ($name): $(cat "$WORK/$name.s")"
	wait "$fp"
	grep -q 'claimed [1-9][0-9]* attached 0' "$WORK/$name.fake" || die "fake listener ($name): $(cat "$WORK/$name.fake")"
	grep -q 'role=client mode=tcp reason=4' "$WORK/$name.c" || die "victim ($name): $(cat "$WORK/$name.c")"
}
hijack hij > /dev/null
grep -q "accept message from uid $AUID" "$WORK/hij.err" || die "no warning: $(cat "$WORK/hij.err")"
echo "  shared directory, a member posing as a plain server's listener: its offer claim refused (reason 4), every byte to the real server"
# (an answer in a shared directory's slot names an arena the client maps
# and is held to the user who sent it that arena: this member sent none)
hijack hij-slot slot > /dev/null
echo "  ... answering in the offer slot instead: refused as well (reason 4), every byte to the real server"
ms=$(hijack hij-garbage garbage) || die "$ms"
echo "  ... writing a slot state of its own: the victim's wait ends (${ms} ms; an older library waited for ever), plain (reason 4)"

# dropped NAME DIR [early]: a root-started server that becomes the attacker's
# user (dropserver: after its listen(), or before it with "early", as
# mosquitto does) and its client, root, both with SHUNT_DIR=DIR; their
# report lines and warnings in $WORK/NAME.{s,c,err}
dropped() {
	local name=$1 dir=$2 P sp; shift 2; P=$(free_port)
	env LD_PRELOAD="$LIBV" SHUNT_DIR="$dir" "$BIN/dropserver" "$P" "$AUID" "$@" > "$WORK/$name.s" 2> "$WORK/$name.err" &
	sp=$!
	wait_port "$P"
	env LD_PRELOAD="$LIBV" SHUNT_DIR="$dir" "$BIN/dropserver" client "$P" > "$WORK/$name.c" 2>> "$WORK/$name.err" ||
		die "client of a server that changed its user ($name): $(cat "$WORK/$name.c" "$WORK/$name.err")"
	wait "$sp" || die "server that changed its user ($name): $(cat "$WORK/$name.s" "$WORK/$name.err")"
}

# 1i. ... or a member that once served the victim for real (it owns that
# connection, so the victim maps its arena) made that arena under the id
# of an arena the victim's server is about to send it (a server sends one
# again, under its old id, once the client unmapped it: ids are the
# maker's to choose, and the slots show them), then copies the victim's
# offer nonce for that server from the slot into its segments.  The
# victim, finding the id mapped, attached its connection to the member's
# segment: the member read its request.  Now an arena sent under a mapped
# id must be the same memfd: refused, plain, every byte to the real server.
# Here the server's arena id is forced to the member's (SHUNT_FAULT_ARENA_ID)
# and its answer stalled 150 ms, so that the member plants in time.
cat > "$BIN/planted.py" <<'PY'
import socket, sys
role, port = sys.argv[1], int(sys.argv[2])
if role == 'server': # one connection, echoed back
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(('127.0.0.1', port)); l.listen(4)
    c, _ = l.accept(); got = b''
    while True:
        b = c.recv(65536)
        if not b: break
        got += b
    c.sendall(got); c.close()
    sys.exit(0)
member = socket.create_connection(('127.0.0.1', int(sys.argv[3]))) # its arena now mapped here
s = socket.create_connection(('127.0.0.1', port)); s.settimeout(10)
req = b"the victim's request " * 1000
s.sendall(req); s.shutdown(socket.SHUT_WR)
got = b''
while True:
    b = s.recv(65536)
    if not b: break
    got += b
print('reply intact' if got == req else 'reply of %d bytes' % len(got))
sys.exit(got != req)
PY
chmod a+r "$BIN/planted.py"
ID=0x5eed5eed5eed5eed SP=$(free_port) AP=$(free_port)
preload $V "$LIBF" SHUNT_DIR="$shared" SHUNT_FAULT_ARENA_ID=$ID SHUNT_FAULT_ANSWER_STALL_MS=150 \
	python3 "$BIN/planted.py" server "$SP" > "$WORK/plant.s" 2>&1 &
sp=$!
wait_port "$SP"
run_as $A "$BIN/fakelisten" "$shared" "$AP" 5 plant "$SP" $ID > "$WORK/plant.fake" 2>&1 &
fp=$!
for _ in $(seq 100); do grep -q 'fake listener' "$WORK/plant.fake" && break; sleep 0.05; done
preload $V "$LIBV" SHUNT_DIR="$shared" timeout 20 python3 "$BIN/planted.py" client "$SP" "$AP" \
	> "$WORK/plant.c" 2> "$WORK/plant.err" ||
	die "victim of a planted arena: $(cat "$WORK/plant.c" "$WORK/plant.err"; wait "$fp"; cat "$WORK/plant.fake")"
wait "$sp" || die "its server: $(cat "$WORK/plant.s")"
wait "$fp"
grep -q 'planted the victim' "$WORK/plant.fake" || die "the member planted nothing: $(cat "$WORK/plant.fake")"
grep -q 'claimed 1 attached 0' "$WORK/plant.fake" || die "planted arena: $(cat "$WORK/plant.fake")"
grep -q "another process's arena was sent under its id: refused" "$WORK/plant.err" ||
	die "no warning: $(cat "$WORK/plant.err")"
echo "  ... or an arena a member that served the victim planted under its server's arena id: refused, every byte to the real server"

# 1j. ... or such a member (the victim maps its arena, sent with the
# member's credentials) poses as the listener of a plain server's port of
# the victim's own user and answers the victim's offer there in the slot,
# naming a segment of that arena with the offer's nonce written into it
# (an answer in the slot is taken in a shared directory since the fortieth
# session, when the user who sent its arena owns the server's end): the
# victim refuses it, every byte to the real server.
SP=$(free_port) AP=$(free_port)
run_as $V /usr/bin/python3 "$BIN/planted.py" server "$SP" > "$WORK/splant.s" 2>&1 &
sp=$!
wait_port "$SP"
run_as $A "$BIN/fakelisten" "$shared" "$AP" 5 slotplant "$SP" 0x5107 > "$WORK/splant.fake" 2>&1 &
fp=$!
for _ in $(seq 100); do grep -q 'fake listener' "$WORK/splant.fake" && break; sleep 0.05; done
preload $V "$LIBV" SHUNT_DIR="$shared" timeout 20 python3 "$BIN/planted.py" client "$SP" "$AP" \
	> "$WORK/splant.c" 2> "$WORK/splant.err" ||
	die "victim of a slot answer: $(cat "$WORK/splant.c" "$WORK/splant.err"; wait "$fp"; cat "$WORK/splant.fake")"
wait "$sp" || die "its server: $(cat "$WORK/splant.s")"
wait "$fp"
grep -q 'answered in its slot' "$WORK/splant.fake" || die "the member answered nothing: $(cat "$WORK/splant.fake")"
grep -q 'claimed 2 attached 0' "$WORK/splant.fake" || die "slot answer: $(cat "$WORK/splant.fake")"
grep -q "answer in the offer slot names arena 5107, sent by uid $AUID, who does not own this connection's server: refused" \
	"$WORK/splant.err" || die "no warning: $(cat "$WORK/splant.err")"
echo "  ... or a slot answer naming the arena of a member that served the victim once: refused, every byte to the real server"

# 1g. ... while a real server whose worker runs as another user than the
# one that made its listener (nginx, sshd) is accelerated: the kernel gives
# an accepted socket to the user of the process that accepted it
dropped drop "$shared"
grep -q 'role=server mode=shm reason=0' "$WORK/drop.s" && grep -q 'role=client mode=shm reason=0' "$WORK/drop.c" ||
	die "a worker of another user than its listener's: $(cat "$WORK/drop.s" "$WORK/drop.c" "$WORK/drop.err")"
echo "  shared directory, a server whose worker is not its listener's user: accelerated (it owns what it accepted)"

# 1h. a server that changes its user before it listens (mosquitto) in a
# directory of root's own cannot register its listener: plain, every byte,
# and it says why - its connections' reason unsafe-dir (19) and one warning
# (before, silently peer-not-shunt on both ends); in the shared directory
# it is accelerated.
priv="$WORK/priv"; mkdir -m 0700 "$priv"
dropped early-priv "$priv" early
grep -q 'role=server mode=tcp reason=19' "$WORK/early-priv.s" && grep -q 'role=client mode=tcp reason=1' "$WORK/early-priv.c" ||
	die "a server that changed its user before listen(), private directory: $(cat "$WORK/early-priv.s" "$WORK/early-priv.c" "$WORK/early-priv.err")"
[ "$(grep -c "its listener cannot be registered - the rendezvous directory $priv is not writable by uid $AUID" "$WORK/early-priv.err")" = 1 ] ||
	die "no warning (or more than one): $(cat "$WORK/early-priv.err")"
dropped early-shared "$shared" early
grep -q 'role=server mode=shm reason=0' "$WORK/early-shared.s" && grep -q 'role=client mode=shm reason=0' "$WORK/early-shared.c" ||
	die "a server that changed its user before listen(), shared directory: $(cat "$WORK/early-shared.s" "$WORK/early-shared.c" "$WORK/early-shared.err")"
echo "  a server that changes its user before it listens: plain with reason unsafe-dir and a warning in a directory of its first user's; accelerated in a shared one"

# 1k. a server that served a client process as root, then became another
# user, serves the same client process (a third user) again: its client
# knows the arena by root's uid, which no longer owns the server's end, so
# the answer goes by message with the arena again (an answer in the slot
# would be refused: plain, reason 4) - both connections accelerated
P=$(free_port)
env LD_PRELOAD="$LIBV" SHUNT_DIR="$shared" SHUNT_LOG=1 "$BIN/dropserver" "$P" "$AUID" late > "$WORK/late.s" 2> "$WORK/late.err" &
sp=$!
wait_port "$P"
preload $V "$LIBV" SHUNT_DIR="$shared" "$BIN/dropserver" client "$P" 2 > "$WORK/late.c" 2>> "$WORK/late.cerr" ||
	die "client of a server that changed its user between two connections: $(cat "$WORK/late.c" "$WORK/late.cerr")"
wait "$sp" || die "server that changed its user between two connections: $(cat "$WORK/late.s" "$WORK/late.err")"
[ "$(grep -c 'role=server mode=shm reason=0' "$WORK/late.s")" = 2 ] && [ "$(grep -c 'role=client mode=shm reason=0' "$WORK/late.c")" = 2 ] ||
	die "a server that changed its user between two connections: $(cat "$WORK/late.s" "$WORK/late.c" "$WORK/late.err" "$WORK/late.cerr")"
[ "$(grep -c 'answered by message, with the arena' "$WORK/late.err")" = 2 ] ||
	die "the second answer did not bring the arena again: $(grep answered "$WORK/late.err")"
echo "  a server that changed its user between two connections of one client: the arena sent again with its new user, both accelerated"

# 1l. the server's side: a member writes an offer for another user's
# connection (a plain client of the victim's to a shunt server of the
# victim's in the shared directory) naming a process of its own - its own
# socket (l), or its process that the server already serves, answered in
# the slot (m: the check the server remembers from the arena's first
# message) - and the server must refuse it (FAILED, no message to the
# member), serving the victim plain, every byte
cat > "$BIN/slowaccept.py" <<'PY'
import os, socket, sys, threading, time
port, sync, first = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('127.0.0.1', port)); l.listen(8)
def echo(c):
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.close()
for _ in range(first): # the member's own connection, served for real
    threading.Thread(target=echo, args=(l.accept()[0],), daemon=True).start()
while not os.path.exists(sync): time.sleep(0.01)
echo(l.accept()[0]) # the victim's
PY
cat > "$BIN/victim.py" <<'PY'
import socket, sys
s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[2]))); s.connect(('127.0.0.1', int(sys.argv[1])))
req = b"the victim's request " * 5000
s.sendall(req); s.shutdown(socket.SHUT_WR); got = b''
while True:
    b = s.recv(65536)
    if not b: break
    got += b
print('reply intact' if got == req else 'reply of %d bytes' % len(got)); sys.exit(got != req)
PY
chmod a+r "$BIN/slowaccept.py" "$BIN/victim.py"
mkdir -m 1777 "$WORK/sync"
# forged NAME [mapped]
forged() {
	local name=$1 P VP sp mp; shift; P=$(free_port) VP=$(free_port)
	preload $V "$LIBV" SHUNT_DIR="$shared" python3 "$BIN/slowaccept.py" "$P" "$WORK/sync/$name" $# \
		> "$WORK/$name.s" 2> "$WORK/$name.serr" &
	sp=$!
	wait_port "$P"
	if [ $# = 1 ]; then
		preload $A "$LIBV" SHUNT_DIR="$shared" "$BIN/fakeoffer" "$shared" "$P" "$VP" "$WORK/sync/$name" mapped
	else
		run_as $A "$BIN/fakeoffer" "$shared" "$P" "$VP" "$WORK/sync/$name"
	fi > "$WORK/$name.m" 2>&1 &
	mp=$!
	for _ in $(seq 100); do grep -q 'member ready' "$WORK/$name.m" && break; sleep 0.05; done
	run_as $V /usr/bin/python3 "$BIN/victim.py" "$P" "$VP" > "$WORK/$name.c" 2>&1 ||
		die "victim of a forged offer ($name): $(cat "$WORK/$name.c"; wait "$mp"; cat "$WORK/$name.m" "$WORK/$name.serr")"
	wait "$mp" || die "member ($name): $(cat "$WORK/$name.m")"
	wait "$sp" || die "its server ($name): $(cat "$WORK/$name.serr")"
	grep -q 'offer written' "$WORK/$name.m" || die "no offer forged ($name): $(cat "$WORK/$name.m")"
	grep -qx 'offer state 5' "$WORK/$name.m" && grep -qx 'messages 0' "$WORK/$name.m" ||
		die "forged offer ($name) answered: $(cat "$WORK/$name.m" "$WORK/$name.serr")"
}
forged forged
grep -q "names another user's socket: refused" "$WORK/forged.serr" || die "no warning: $(cat "$WORK/forged.serr")"
echo "  a member's offer for another user's connection, naming its own socket: refused by the server, every byte to the victim"
forged forged-mapped mapped
grep -q "connection: its end is not its user's: refused" "$WORK/forged-mapped.serr" ||
	die "no warning: $(cat "$WORK/forged-mapped.serr")"
echo "  ... naming its own process that the server already serves (an answer in the slot): refused, every byte to the victim"
echo "dir: ok"
