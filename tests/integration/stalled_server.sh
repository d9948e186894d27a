#!/usr/bin/env bash
# Description: a server stalled between claiming a client's offer and
# answering it (SIGSTOP, swap, a paused VM: here the fault-injection build,
# SHUNT_FAULT_ANSWER_STALL_MS) for longer than the client waits (5 s).
# Three connections from one client process to one server process, 1 MiB
# each way: the first is accelerated; the second's answer - the first
# given in the offer slot - comes 6 s late, after the client gave up:
# both ends must agree on TCP (reason 4, handshake-failed), every byte
# intact, nobody waiting on a ring the other end never reads; the third,
# made while the server is still stalled, is intact and in the same mode
# on both ends (plain: the client's accept wait ran out first).
# Time limit: 60
. "$(dirname "$0")/lib.sh"
STREAM="$ROOT/$BUILD/tests/tools/stream"
FAULTS="$ROOT/$BUILD/libshunt-faults.so"
[ -f "$FAULTS" ] || die "missing $FAULTS (make tests)"
P=$(free_port)
env LD_PRELOAD="$FAULTS" SHUNT_FAULT_ANSWER_STALL_MS=6000 SHUNT_FAULT_ANSWER_AT=2 \
	"$STREAM" server 127.0.0.1 "$P" 1 block 3 > "$WORK/s.out" 2> "$WORK/s.err" &
sp=$!
PIDS+=("$sp")
wait_port "$P"
t0=$(date +%s)
env LD_PRELOAD="$ROOT/$BUILD/libshunt.so" "$STREAM" client 127.0.0.1 "$P" 1 block 3 > "$WORK/c.out" 2> "$WORK/c.err" ||
	die "client: $(cat "$WORK/c.out" "$WORK/c.err")"
wait "$sp" || die "server: $(cat "$WORK/s.out" "$WORK/s.err")"
took=$(( $(date +%s) - t0 ))
for side in c s; do
	f="$WORK/$side.out"
	grep -q 'conn=0 mode=shm reason=0 bytes=1048576 ok' "$f" || die "$side: first connection: $(cat "$f")"
	grep -q 'conn=1 mode=tcp reason=4 bytes=1048576 ok' "$f" || die "$side: stalled connection: $(cat "$f")"
	grep -q 'conn=2 mode=[a-z]* reason=[0-9]* bytes=1048576 ok' "$f" || die "$side: third connection: $(cat "$f")"
done
m2c=$(sed -n 's/.*conn=2 mode=\([a-z]*\).*/\1/p' "$WORK/c.out")
m2s=$(sed -n 's/.*conn=2 mode=\([a-z]*\).*/\1/p' "$WORK/s.out")
[ "$m2c" = "$m2s" ] || die "third connection: client $m2c, server $m2s"
echo "stalled server: the client gave up after 5 s, both ends on TCP (reason 4), all bytes intact; the next connection $m2c on both ends (${took} s)"
