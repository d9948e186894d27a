#!/usr/bin/env bash
# Description: attack #2 of issue #12 - a hostile peer in the arena.  The
# attacker (another user, through a shared sticky SHUNT_DIR) runs the fault
# build with SHUNT_FAULT_RING=KIND and attacks the segment it shares with
# the victim (tests/tools/hostile): impossible cursors, a producer going
# back, lock words held for ever, truncating the arena, an unsealed arena.
# The victim (the real shim) must end only that connection, with
# ECONNRESET within a bounded time and reason peer-broke-ring (20) - never
# read past its ring, crash, SIGBUS or hang - while its other connection to
# the same peer, in the same arena, carries on; a truncation is refused by
# the seals, an unsealed arena - or one whose doorbells are not eventfds
# (a pipe's ends) - is never mapped (plain, reason 4).
. "$(dirname "$0")/lib.sh"
V=shunt-victim A=shunt-attacker
shared="$WORK/shared"; mkdir "$shared"; chmod 1777 "$shared"; chmod 0711 "$WORK"
for k in prod cons back lock truncate unsealed pipebell; do
	P=$(free_port)
	preload $A "$LIBF" SHUNT_DIR="$shared" SHUNT_FAULT_RING=$k "$BIN/hostile" attacker "$P" > "$WORK/a.$k" 2>&1 &
	ap=$!
	wait_port "$P"
	preload $V "$LIBV" SHUNT_DIR="$shared" timeout 30 "$BIN/hostile" victim "$P" $k > "$WORK/v.$k" 2>&1 ||
		die "victim of '$k': $(cat "$WORK/v.$k") / attacker: $(cat "$WORK/a.$k")"
	kill "$ap" 2>/dev/null; wait "$ap" 2>/dev/null
	case $k in
	truncate) grep -q 'ftruncate(arena, 0) Operation not permitted' "$WORK/a.$k" ||
			die "the arena could be truncated: $(cat "$WORK/a.$k")" ;;
	unsealed | pipebell) ;;
	*) grep -q "fault: attacked the shared ring ($k)" "$WORK/a.$k" || die "no attack: $(cat "$WORK/a.$k")"
	   grep -q 'connection reset: the peer broke its shared ring' "$WORK/v.$k" ||
			die "no warning: $(cat "$WORK/v.$k")" ;;
	esac
	echo "  $(grep 'victim:' "$WORK/v.$k")"
done
echo "arena: ok"
