#!/usr/bin/env bash
# Description: a client slow to confirm the server's ACCEPT(RDMA) - stopped,
# swapped out, or one that never answers (libshunt-faults.so
# SHUNT_FAULT_CONFIRM_MS=4000: its CONFIRM goes 4 s after the ACCEPT) -
# holds up neither the server's accept() nor the client behind it: the
# server's accept() waits for the word as long as for the PROPOSAL (here
# 400 ms: SHUNT_ACCEPT_WAIT_MS=4000 - 500 ms in the non-blocking accept()
# of the epoll server, with 20000: emulated RDMA's PROPOSAL may come later
# than 50 ms), then returns the socket plain until its first call settles
# it.  Client B, started 0.5 s after the slow A,
# must be connected within 1.5 s (before, the server's accept() waited
# for A's CONFIRM up to 10 s: B's connect took ~3.5 s), and A's connection
# must still become RDMA at its late CONFIRM and carry every byte: with a
# thread a connection whose first act is a banner (the write waits for
# the word), with one epoll thread that registered A before the word
# came (the registration follows the connection), and with one poll()
# thread that writes a banner first: poll must not report room its write
# would wait for - before, each poll said writable, each write waited
# 5 ms for the word and said EAGAIN, and the loop spun in such stalls for
# the 4 s (it must stall under 100 ms in all) - and the same with a
# level-triggered epoll loop (eloop: its set reported the socket's room);
# and with a reader thread
# that is about to sleep on the socket when another thread's call takes
# the word and attaches the connection (the fault build's
# SHUNT_FAULT_CONFIRM_READ_MS: the reader preempted 6 s there) - the read
# must still get A's request, which comes over RDMA (before, it slept on
# the socket for ever).
set -eu
. "$(dirname "$0")/lib.sh"
T=$BUILD/tests/tools/lateconfirm
S=/tmp/lc-s.out A=/tmp/lc-a.out B=/tmp/lc-b.out
die() { echo "FAIL: $*"; tail -15 $S; tail -5 $A; tail -5 $B; exit 1; }
port=7870
# run_mode MODE: the server and clients A and B, each one's output in S, A, B
run_mode() {
	local mode=$1 wait_ms=4000 slib=$LIB sp ap
	port=$((port + 1))
	case $mode in epoll | eloop | poll) wait_ms=20000 ;; esac
	: > $S # a stale "listening" must not start the clients
	[ $mode = race ] && slib="$(dirname "$LIB")/libshunt-faults.so"
	env LD_PRELOAD="$slib" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 SHUNT_ACCEPT_WAIT_MS=$wait_ms \
		SHUNT_FAULT_CONFIRM_READ_MS=6000 timeout 60 "$T" server 10.0.0.1 $port $mode 2 > $S 2>&1 &
	sp=$!
	listening $S
	env LD_PRELOAD="$(dirname "$LIB")/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 \
		SHUNT_ACCEPT_WAIT_MS=$wait_ms SHUNT_FAULT_CONFIRM_MS=4000 timeout 60 "$T" client 10.0.0.1 $port $mode A > $A 2>&1 &
	ap=$!
	sleep 0.5
	env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1 timeout 60 "$T" client 10.0.0.1 $port $mode B > $B 2>&1 ||
		die "$mode: client B"
	wait $ap || die "$mode: client A"
	wait $sp || die "$mode: server"
	grep -q 'client A: .* ok' $A || die "$mode: A's data"
}
for mode in threads epoll eloop poll race; do
	# The scenario needs A's PROPOSAL within the accept's wait (400 ms
	# where SHUNT_ACCEPT_WAIT_MS is 4000; A waits for the answer as long,
	# its own RDMA set-up included): under emulation a client's
	# first RDMA set-up has made it later (219 ms once against 200 ms: its
	# accept then took it plain, handshake-timeout, and no word was ever
	# awaited) - that run tested nothing here, so the mode runs again, up
	# to three times; every check below holds for the run that counts.
	for try in 1 2 3; do
		run_mode $mode
		if grep -q "the client's word has not come" $S || ! grep -q 'accept fd .*: tcp, handshake-timeout' $S; then
			break
		fi
		echo "late_confirm $mode: A's PROPOSAL came after the accept's wait (its word was never awaited, run $try)"
	done
	bconn=$(sed -n 's/^client B: connect \([0-9]*\) ms.*/\1/p' $B)
	[ -n "$bconn" ] || die "$mode: B's connect not reported"
	[ "$bconn" -lt 1500 ] || die "$mode: B connected after $bconn ms: the server's accept() waited for A's CONFIRM"
	grep -q "the client's word has not come" $S || die "$mode: A's word came in time (the fault did not hold it)"
	grep -q 'settled at its first call: rdma, none' $S || die "$mode: A's connection did not become RDMA at its CONFIRM"
	[ "$(grep -c 'accept fd .*: rdma, none' $S)" -ge 1 ] || die "$mode: B's connection is not RDMA"
	stall=
	if [ $mode = poll ] || [ $mode = eloop ]; then
		stall=$(sed -n 's/^stalled \([0-9]*\) ms in \([0-9]*\) writes/\1 ms in \2 writes/p' $S)
		[ -n "$stall" ] || die "$mode: no stall reported"
		[ "${stall%% *}" -lt 100 ] || die "$mode: the loop stalled $stall (it was told of room before the word)"
		stall="; the loop stalled $stall"
	fi
	echo "late_confirm $mode: B connected in $bconn ms while A's CONFIRM took 4 s ($(sed -n 's/^client B: //p' $B)); A: $(sed -n 's/^client A: //p' $A) (RDMA from its CONFIRM)$stall"
done
