#!/usr/bin/env bash
# Description: what killed processes leave in the rendezvous directory goes
# without `shunt ss`.  A socat server and a connected socat client, both
# under shunt, are killed with SIGKILL: their stats files (s<id>), the
# client's message socket (c<id>) and the server's port registry (p<port>)
# stay.  The next process that ends cleanly sweeps (src/setup/dirsweep.c,
# once its files are 2 s old and the user's sweep mark is older than 10 s):
# every file of the killed processes goes, a stale registry temporary
# goes, and nothing of a live server and a live connected client does -
# nor a FIFO, a symlink or a directory planted under names shunt uses
# (none of them followed, opened for long or removed).  The live server
# still accelerates a new connection afterwards.
# Time limit: 60
. "$(dirname "$0")/lib.sh"
need socat

# the clients' input: held open (no byte) until the script ends
mkfifo "$WORK/hold"
exec 3<> "$WORK/hold"
snap() { (cd "$SHUNT_DIR" && ls -1 | grep -E '^[spc]' | sort); }
has_all() { # what-list description
	local f
	for f in $1; do [ -e "$SHUNT_DIR/$f" ] || [ -L "$SHUNT_DIR/$f" ] || die "$2: $f is gone"; done
}

# the live ones: a server and a client holding a connection to it
PL=$(free_port)
bg "$WORK/live-srv.log" env SHUNT_LOG=1 "$SHUNT" run -- socat "TCP-LISTEN:$PL,reuseaddr,fork" EXEC:cat
wait_port "$PL"
SHUNT_LOG=1 "$SHUNT" run -- socat - "TCP:127.0.0.1:$PL" < "$WORK/hold" > /dev/null 2> "$WORK/live-cli.log" &
PIDS+=($!)
for _ in $(seq 100); do [ "$(count 'accelerated (shm)' "$WORK/live-cli.log")" -ge 1 ] && break; sleep 0.05; done
expect_accel "$WORK/live-cli.log" 1
live=$(snap)

# the killed ones, the same on another port
PK=$(free_port)
"$SHUNT" run -- socat "TCP-LISTEN:$PK,reuseaddr,fork" EXEC:cat > /dev/null 2>&1 &
kpid=$!
PIDS+=("$kpid")
wait_port "$PK"
SHUNT_LOG=1 "$SHUNT" run -- socat - "TCP:127.0.0.1:$PK" < "$WORK/hold" > /dev/null 2> "$WORK/dead-cli.log" &
PIDS+=($!)
for _ in $(seq 100); do [ "$(count 'accelerated (shm)' "$WORK/dead-cli.log")" -ge 1 ] && break; sleep 0.05; done
expect_accel "$WORK/dead-cli.log" 1
dead=$(comm -13 <(echo "$live") <(snap))
echo "$dead" | grep -q "^p$PK\$" || die "no registry for port $PK: $dead"
[ "$(echo "$dead" | grep -c '^s')" -ge 2 ] || die "expected the killed server's and client's stats files: $dead"
echo "$dead" | grep -q '^c' || die "expected the killed client's socket: $dead"
pkill -KILL -f "TCP-LISTEN:$PK" || die "no server to kill"
pkill -KILL -f "TCP:127.0.0.1:$PK" || die "no client to kill"
sleep 0.3
has_all "$dead" "right after SIGKILL"

# planted under shunt's names: never followed or removed
mkfifo "$SHUNT_DIR/p9999"
ln -s /etc/passwd "$SHUNT_DIR/s0123456789abcdef"
mkdir "$SHUNT_DIR/p8888"
: > "$SHUNT_DIR/p1234.0123456789abcdef" # a registry's temporary, its maker gone
touch -d '1 minute ago' "$SHUNT_DIR/p1234.0123456789abcdef"
planted="p9999 s0123456789abcdef p8888"

sleep 2.2 # the files are no longer young
rm -f "$SHUNT_DIR/lastsweep-$(id -u)" # (a sweep ran within 10 s: the clean exits above)
echo hi | SHUNT_LOG=1 "$SHUNT" run -- socat -t 2 - "TCP:127.0.0.1:$PL" > "$WORK/echo.out" 2> "$WORK/sweeper.log"
[ "$(cat "$WORK/echo.out")" = hi ] || die "echo through the live server: '$(cat "$WORK/echo.out")'"
expect_accel "$WORK/sweeper.log" 1
for f in $dead; do
	[ -e "$SHUNT_DIR/$f" ] && die "$f of a killed process is still there (log: $(cat "$WORK/sweeper.log"))"
done
[ -e "$SHUNT_DIR/p1234.0123456789abcdef" ] && die "a stale registry temporary is still there"
has_all "$live" "the sweep"
has_all "$planted" "the sweep"
[ "$(readlink "$SHUNT_DIR/s0123456789abcdef")" = /etc/passwd ] || die "the planted symlink changed"
[ -s /etc/passwd ] || die "/etc/passwd was touched"
# (the sweeper: the client, or the server's child that served it - whichever ended first)
n=$(cat "$WORK/sweeper.log" "$WORK/live-srv.log" | grep -c 'left by a process that ended without cleaning up')
[ "$n" -ge 4 ] || die "the sweep logged $n removals, expected >= 4 (2 stats files, a registry, a temporary)"

# the live server goes on
echo again | SHUNT_LOG=1 "$SHUNT" run -- socat -t 2 - "TCP:127.0.0.1:$PL" > "$WORK/echo2.out" 2> "$WORK/after.log"
[ "$(cat "$WORK/echo2.out")" = again ] || die "echo after the sweep: '$(cat "$WORK/echo2.out")'"
expect_accel "$WORK/after.log" 1
echo "dir sweep: $(echo "$dead" | wc -w) files of 2 killed processes and a stale temporary removed by the next clean exit; $(echo "$live" | wc -w) live files and 3 planted entries kept"
