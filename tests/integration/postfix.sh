#!/usr/bin/env bash
# Description: Postfix as Debian ships it (its master.cf, smtpd not
# chrooted), an instance of its own (`postfix -c`), under shunt with its
# clients (Python's smtplib, under shunt).  Three 2 MB messages each set-up,
# delivered to a Maildir and compared with what was sent.  Postfix is the
# program that tells what a daemon's own environment and users do:
# - the `postfix` command starts the master with only what
#   import_environment names: by default no LD_PRELOAD, and nothing of ours
#   to inherit - so postfix runs without shunt, which the log says (the
#   exec's line) and its clients see (peer-not-shunt);
# - with LD_PRELOAD and SHUNT_* imported, the master listens under shunt,
#   spawns smtpd with the listener when a client comes, and smtpd drops root
#   for postfix: in root's private directory it can no longer pass a
#   segment, so it says so once and its connections stay plain (reason
#   unsafe-dir) - before, each made a 16 MB segment, failed to send it and
#   fell back as handshake-failed, with no word of why;
# - with a shared sticky SHUNT_DIR (docs/configuration.md) every session
#   is accelerated.
# Time limit: 150
. "$(dirname "$0")/lib.sh"
PATH=$PATH:/usr/sbin:/usr/lib/postfix/sbin
need postfix; need python3
id postfix >/dev/null 2>&1 || { echo "skip: no postfix user (postfix not configured)"; exit 77; }
[ -r /usr/share/postfix/master.cf.dist ] || { echo "skip: no master.cf.dist"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "skip: postfix's master needs root"; exit 77; }
P=$(free_port)
chmod 755 "$WORK"
cat > "$WORK/client.py" <<'PY'
import smtplib, sys, os, base64, time
port, n, maildir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sent = []
for i in range(n):
    body = base64.encodebytes(os.urandom(1_500_000)).decode()
    msg = "From: a@test.example\nTo: sink@test.example\nSubject: m%d\n\n%s" % (i, body)
    with smtplib.SMTP('127.0.0.1', port, timeout=60) as s:
        s.sendmail('a@test.example', ['sink@test.example'], msg)
    sent.append(body)
new = os.path.join(maildir, 'new')
for _ in range(600): # delivery is the queue manager's, asynchronous
    got = os.listdir(new) if os.path.isdir(new) else []
    if len(got) >= n:
        break
    time.sleep(0.1)
bodies = []
for f in got:
    text = open(os.path.join(new, f)).read()
    bodies.append(text.split('\n\n', 1)[1])
missing = [i for i, b in enumerate(sent) if b not in bodies]
if len(got) != n or missing:
    sys.exit("%d messages delivered of %d; different or missing: %s" % (len(got), n, missing))
print("%d messages delivered intact" % n)
PY
# run NAME IMPORT: a fresh instance (config, queue, Maildir), one session to
# start smtpd, then three, all under shunt; postfix stopped after.  IMPORT:
# what import_environment adds to postfix's defaults.
run() {
	local conf="$WORK/$1/conf" spool="$WORK/$1/spool" data="$WORK/$1/data" vmail="$WORK/$1/vmail"
	mkdir -p "$conf" "$spool" "$data" "$vmail"
	chown postfix "$data"; chown 65534:65534 "$vmail"
	sed "s/^smtp      inet  n       -       y       -       -       smtpd/$P inet n - n - - smtpd/" \
		/usr/share/postfix/master.cf.dist > "$conf/master.cf"
	grep -q "^$P inet" "$conf/master.cf" || die "master.cf.dist: no smtp inet line to replace"
	cat > "$conf/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $spool
data_directory = $data
maillog_file = $WORK/$1/maillog
maillog_file_prefixes = /tmp
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = shunt.test
mydestination =
alias_maps =
alias_database =
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
message_size_limit = 0
virtual_mailbox_limit = 0
virtual_mailbox_domains = test.example
virtual_mailbox_base = $vmail
virtual_mailbox_maps = static:sink/
virtual_uid_maps = static:65534
virtual_gid_maps = static:65534
import_environment = MAIL_CONFIG MAIL_DEBUG MAIL_LOGTAG TZ LANG=C POSTLOG_SERVICE POSTLOG_HOSTNAME $2
EOF
	SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/$1.server.log" "$SHUNT" run -- postfix -c "$conf" start-fg \
		> "$WORK/$1.out" 2>&1 &
	local srv=$!
	wait_port "$P"
	out=$(SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/$1.warm.log" timeout 60 "$SHUNT" run -- \
		python3 "$WORK/client.py" "$P" 1 "$vmail/sink" 2>&1) || die "$1 (first): $out; $(tail -5 "$WORK/$1/maillog")"
	rm -rf "$vmail/sink"
	out=$(SHUNT_LOG=1 SHUNT_LOG_FILE="$WORK/$1.client.log" timeout 60 "$SHUNT" run -- \
		python3 "$WORK/client.py" "$P" 3 "$vmail/sink" 2>&1) || die "$1: $out; $(tail -5 "$WORK/$1/maillog")"
	postfix -c "$conf" stop >/dev/null 2>&1 || kill "$srv"
	wait "$srv" 2>/dev/null
	for _ in $(seq 50); do ss -Htln "sport = :$P" | grep -q . || break; sleep 0.1; done
	echo "$1: $out"
}

run default ""
grep -q "exec .*postfix-script: its environment has no LD_PRELOAD of shunt's" "$WORK/default.server.log" ||
	die "default: no word that postfix runs without shunt: $(cat "$WORK/default.server.log")"
n=$(count "connect fd [0-9]*: tcp, peer-not-shunt" "$WORK/default.client.log")
[ "$n" -eq 3 ] || die "default: $n clients plain (peer-not-shunt), expected 3: $(cat "$WORK/default.client.log")"
echo "  the log says postfix's master runs without shunt; 3 clients plain, peer-not-shunt"

IMPORTED="LD_PRELOAD SHUNT_DIR SHUNT_LOG SHUNT_LOG_FILE"
run private "$IMPORTED"
grep -q "uid [0-9]* cannot use the rendezvous directory $SHUNT_DIR" "$WORK/private.server.log" ||
	die "private: no word of smtpd's user: $(cat "$WORK/private.server.log")"
n=$(count "accept fd [0-9]*: tcp, unsafe-dir" "$WORK/private.server.log")
[ "$n" -ge 3 ] || die "private: $n connections plain with unsafe-dir at smtpd, expected 3: $(cat "$WORK/private.server.log")"
grep -q "accelerated\|handshake-failed" "$WORK/private.client.log" &&
	die "private: a client accelerated or refused late: $(cat "$WORK/private.client.log")"
echo "  root's private directory: smtpd said why once; $n connections plain, reason unsafe-dir"

workers_share_dir
run shared "$IMPORTED"
n=$(count "connect fd [0-9]*: accelerated (shm)" "$WORK/shared.client.log")
[ "$n" -eq 3 ] || die "shared: $n of 3 sessions accelerated: $(cat "$WORK/shared.client.log")"
echo "  a shared directory: 3 of 3 sessions accelerated"
