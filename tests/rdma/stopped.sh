#!/usr/bin/env bash
# Description: write(), shutdown() and close() towards a stopped peer
# (SIGSTOP: a debugger, a paused container) return at once, as TCP's.  The client's
# 600 non-blocking one-byte writes - 600 cursor messages - exhaust the
# stopped server's posted receives (RNR, retried for ever) and then fill the
# send queue; what it cannot take is posted by the progress thread once the
# server resumes a second after the shutdown, and the kernel's FIN follows
# the closing word's completion.  Before, the 512th write() spun until the
# server resumed, and shutdown() and close() waited for the completion
# (2 s, then moved the connection to TCP).  The close() round ends the
# client process right after close(): its end waits for the closing word;
# the closefork round forks a child right after close() that lives 8 s
# and keeps the server stopped past the closing word's 2 s: the connection
# moves to TCP, and the server's EOF must not wait for that child.
# Every byte arrives, both ends stay on RDMA.
set -eu
. "$(dirname "$0")/lib.sh"
T=$BUILD/tests/tools/stopped
GO=/tmp/stopped.go
die() { echo "FAIL: $*"; tail -5 /tmp/sp-s.out; tail -5 /tmp/sp-c.out; exit 1; }
# round KIND PORT: KIND shutdown or close
round() {
	rm -f "$GO"
	: > /tmp/sp-s.out
	: > /tmp/sp-c.out
	env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 60 "$T" server 10.0.0.1 "$2" > /tmp/sp-s.out 2>&1 &
	sp=$!
	listening /tmp/sp-s.out
	local extra=() kind=$1
	[ "$1" = close ] || [ "$1" = closefork ] && extra=("$1") && kind=close
	env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 60 "$T" client 10.0.0.1 "$2" "$GO" "${extra[@]}" > /tmp/sp-c.out 2>&1 &
	cp=$!
	for _ in $(seq 200); do grep -q accepted /tmp/sp-s.out && break; sleep 0.05; done
	grep -q accepted /tmp/sp-s.out || die "not accepted"
	sleep 0.2 # the server's accept() returned to its read
	kill -STOP $sp
	touch "$GO"
	for _ in $(seq 200); do grep -q "$kind"_ms /tmp/sp-c.out && break; sleep 0.05; done
	sleep "${3:-1}"
	kill -CONT $sp
	local t0=${EPOCHREALTIME/./}
	wait $sp || die "server ($1)"
	eof_ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
	wait $cp || die "client ($1)"
	wms=$(sed -n 's/^writes_ms=//p' /tmp/sp-c.out)
	[ -n "$wms" ] && [ "$wms" -lt 300 ] || die "600 non-blocking writes took ${wms:-?} ms with the peer stopped"
	ms=$(sed -n "s/^${kind}_ms=//p" /tmp/sp-c.out)
	[ -n "$ms" ] && [ "$ms" -lt 300 ] || die "$kind() took ${ms:-?} ms with the peer stopped"
	grep -q 'role=client mode=rdma reason=0' /tmp/sp-c.out || die "client: $(grep role= /tmp/sp-c.out)"
	grep -q "role=server mode=${4:-rdma reason=0}" /tmp/sp-s.out || die "server: $(grep role= /tmp/sp-s.out)"
}
round shutdown 7840
sms=$ms
round close 7841
cms=$ms
# a child forked just after the close lives 8 s, and the server stays
# stopped for 3 s: the closing word is late, the connection moves to TCP
# (the server sees peer-failover) and its bytes and FIN go on the socket -
# which the child must not hold open: the server's EOF comes once it
# resumed, not at that child's end
round closefork 7842 3 "tcp reason=17"
[ "$eof_ms" -lt 5000 ] || die "the server's EOF came $eof_ms ms after it resumed: a child forked after the close held the socket"
echo "stopped peer: 600 non-blocking one-byte writes $wms ms, shutdown() $sms ms, close() $cms ms" >> "${RESULTS:-/dev/null}"
echo "stopped: towards a stopped peer 600 non-blocking writes took $wms ms, shutdown() $sms ms, close() $cms ms (the process ending right after it), the EOF $eof_ms ms after the resume with a child forked after the close; the rest was posted and the FIN followed once the peer resumed; 600 bytes intact, rdma"
