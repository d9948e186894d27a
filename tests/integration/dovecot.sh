#!/usr/bin/env bash
# Description: dovecot's IMAP server as Debian ships it, under shunt with
# its clients (Python's imaplib, under shunt).  dovecot's master starts its
# login processes with an environment of its own making (only what
# import_environment names: no LD_PRELOAD, no SHUNT_*) and hands them its
# listener; a login process reads the client's LOGIN and passes the
# connection (SCM_RIGHTS) to an imap process.  Two set-ups, three sessions
# each, a 2 MB message appended and fetched back intact in each:
# - Debian's default: login processes chroot (and run as dovenull in a
#   private directory): from the chroot no accept message reaches a client,
#   so the connections stay plain - said at once (reason unsafe-dir at the
#   server, its clients offer nowhere), with no wait (before: every
#   greeting came 20 ms late, the client asleep on a refused offer);
# - login processes not chrooted, with a shared SHUNT_DIR (the trust
#   domain of a server whose workers change user, docs/configuration.md):
#   each connection is accelerated until its login process passes it on,
#   then moves to TCP at the exact byte (fd-passed) - before, the login
#   processes ran without shunt and every connection was plain.
# Time limit: 120
. "$(dirname "$0")/lib.sh"
need dovecot; need python3
id dovenull >/dev/null 2>&1 || { echo "skip: no dovenull user (dovecot-core not configured)"; exit 77; }
P=$(free_port)
mkdir -p "$WORK/run" "$WORK/home"
chmod 755 "$WORK"
chown 65534:65534 "$WORK/home"
echo 'alice:{PLAIN}secret' > "$WORK/passwd"
cat > "$WORK/client.py" <<'PY'
import imaplib, sys, hashlib, os, time
port = int(sys.argv[1]); worst = 0
for i in range(3):
    t = time.time()
    M = imaplib.IMAP4('127.0.0.1', port)
    worst = max(worst, time.time() - t)
    M.login('alice', 'secret')
    M.select('INBOX')
    msg = ("Subject: m%d\r\n\r\n" % i).encode() + os.urandom(1_000_000).hex().encode()
    M.append('INBOX', None, None, msg)
    typ, data = M.search(None, 'ALL')
    typ, d = M.fetch(data[0].split()[-1], '(RFC822)')
    if hashlib.sha256(d[0][1]).digest() != hashlib.sha256(msg).digest():
        sys.exit("session %d: the message came back different (%d bytes, sent %d)" % (i, len(d[0][1]), len(msg)))
    M.logout()
print("greeting at most %.1f ms after connect" % (worst * 1000))
PY
# run NAME CHROOT: dovecot and three client sessions, both under shunt
run() {
	bash "$ROOT/tests/tools/dovecot_conf.sh" "$WORK" "$P" "$2" > "$WORK/$1.conf"
	rm -rf "$WORK/home/alice"
	SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/$1.server.log" "$SHUNT" run -- dovecot -F -c "$WORK/$1.conf" \
		> "$WORK/$1.out" 2>&1 &
	srv=$!
	wait_port "$P"
	out=$(SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/$1.client.log" timeout 60 "$SHUNT" run -- \
		python3 "$WORK/client.py" "$P" 2>&1) || die "$1: $out; $(tail -5 "$WORK/dovecot.log")"
	kill "$srv"; wait "$srv" 2>/dev/null
	for _ in $(seq 50); do ss -Htln "sport = :$P" | grep -q . || break; sleep 0.1; done
	echo "$1: 3 sessions intact, $out"
}
run chrooted yes
n=$(count "accept fd [0-9]*: tcp, unsafe-dir" "$WORK/chrooted.server.log")
[ "$n" -ge 3 ] || die "chrooted: $n login processes said unsafe-dir, expected 3: $(cat "$WORK/chrooted.server.log")"
grep -q "accelerated" "$WORK/chrooted.client.log" && die "chrooted: a connection accelerated?"
echo "  login processes: $n connections plain, reason unsafe-dir"
workers_share_dir
chmod 755 "$WORK"
run shared no
n=$(count "accelerated (shm)" "$WORK/shared.client.log")
m=$(count "the peer moved it to TCP (fd-passed)" "$WORK/shared.client.log")
[ "$n" -eq 3 ] && [ "$m" -eq 3 ] ||
	die "shared: $n accelerated, $m moved at the pass, expected 3 and 3: $(cat "$WORK/shared.client.log")"
echo "  3 connections accelerated until the login process passed each on (then TCP, fd-passed)"
