#!/usr/bin/env bash
# Description: shuntd loads its programs (sock_ops, cgroup sockopt) on a
# cgroup v2 directory; inside that cgroup a client and listener registered
# through their own sockets exchange the TCP option (nonce, answer ~nonce),
# plain sockets see none, a registered client facing a plain listener learns
# so; outside the cgroup, and once shuntd is killed, the kernel refuses the
# option (no agent); --allow-uid leaves other users without it.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "skip: needs root (CAP_BPF, CAP_NET_ADMIN)"; exit 77; }
[ -x "$ROOT/$BUILD/shuntd" ] || { echo "skip: shuntd not built (libbpf-dev, clang)"; exit 77; }
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cg2" ] || { echo "skip: no cgroup v2 mounted"; exit 77; }
CG="$cg2/shunt-test-$$"
mkdir "$CG" || die "cannot create $CG"
replayd= RCG=
cleanup_agent() {
	kill "$agent" $replayd 2>/dev/null; wait "$agent" $replayd 2>/dev/null
	rmdir "$CG" ${RCG:+"$RCG"} 2>/dev/null
	rm -rf ${shared:+"$shared"}
	cleanup
}
"$ROOT/$BUILD/shuntd" --cgroup "$CG" > "$WORK/agent.log" 2>&1 &
agent=$!
trap cleanup_agent EXIT
for _ in $(seq 100); do grep -q ready "$WORK/agent.log" && break; sleep 0.05; done
grep -q ready "$WORK/agent.log" || die "shuntd did not start: $(cat "$WORK/agent.log")"
sh -c "echo \$\$ > '$CG/cgroup.procs'; exec '$ROOT/$BUILD/tests/tools/optcheck'" || die "option exchange"
"$ROOT/$BUILD/tests/tools/optcheck" absent || die "a process outside the agent's cgroup reached it"

# A server that replays unknown options (in its own cgroup, its own program).
RCG="$cg2/shunt-replay-$$"
mkdir "$RCG" || die "cannot create $RCG"
"$ROOT/$BUILD/tests/bpf/replayd" "$ROOT/$BUILD/tests/bpf/replay.bpf.o" "$RCG" > "$WORK/replayd.log" 2>&1 &
replayd=$!
for _ in $(seq 100); do grep -q ready "$WORK/replayd.log" && break; sleep 0.05; done
grep -q ready "$WORK/replayd.log" || die "replayd did not start"
P=$(free_port)
sh -c "echo \$\$ > '$RCG/cgroup.procs'; exec socat TCP-LISTEN:$P,reuseaddr - > '$WORK/replay.out'" &
rsrv=$!
wait_port "$P"
sh -c "echo \$\$ > '$CG/cgroup.procs'; exec '$ROOT/$BUILD/tests/tools/optcheck' replay $P" || die "replay detection"
wait "$rsrv"
grep -q ping "$WORK/replay.out" || die "data did not reach the replaying server"
kill "$replayd"; wait "$replayd"
rmdir "$RCG" || die "the replay cgroup is still in use"
# The shim with the agent: two "hosts" (separate SHUNT_DIRs, so the local
# rendezvous cannot match) in the agent's cgroup.  Shunt on both ends: the
# option exchange says capable, the in-band handshake runs (PROPOSAL, then
# DECLINE: no cross-host transport yet) -> plain with reason 12 on both
# ends; one end plain -> reason 1, no handshake; the peers check every byte
# both ways, so a handshake byte leaking into the stream would fail them.
PEER="$ROOT/$BUILD/tests/tools/peer"
mkdir -p "$WORK/hostA" "$WORK/hostB"
in_cg() { sh -c "echo \$\$ > '$CG/cgroup.procs'; exec \"\$@\"" sh "$@"; }
hostpair() { # server-shunt client-shunt [order] -> "srvline|cliline"
	local P; P=$(free_port)
	local s=() c=()
	[ "$1" = 1 ] && s=(env SHUNT_DIR="$WORK/hostB" "$SHUNT" run --)
	[ "$2" = 1 ] && c=(env SHUNT_DIR="$WORK/hostA" "$SHUNT" run --)
	: > "$WORK/hs.out" # a stale "listening" must not start the client
	in_cg "${s[@]}" "$PEER" server 127.0.0.1 "$P" "${3:-cfirst}" > "$WORK/hs.out" 2>&1 &
	local sp=$!
	for _ in $(seq 100); do grep -q listening "$WORK/hs.out" && break; sleep 0.02; done
	in_cg "${c[@]}" "$PEER" client 127.0.0.1 "$P" "${3:-cfirst}" > "$WORK/hc.out" 2>&1 || die "client: $(cat "$WORK/hc.out")"
	wait "$sp" || die "server: $(cat "$WORK/hs.out")"
	echo "$(grep role= "$WORK/hs.out")|$(cat "$WORK/hc.out")"
}
out=$(hostpair 1 1)
echo "$out" | grep -q 'role=server mode=tcp reason=12' || die "shunt/shunt across hosts, server: $out"
echo "$out" | grep -q 'role=client mode=tcp reason=12' || die "shunt/shunt across hosts, client: $out"
out=$(hostpair 1 1 sfirst) # the server speaks first: the handshake precedes it
echo "$out" | grep -q 'role=server mode=tcp reason=12' || die "server-first, server: $out"
echo "$out" | grep -q 'role=client mode=tcp reason=12' || die "server-first, client: $out"
out=$(hostpair 1 0)
echo "$out" | grep -q 'role=server mode=tcp reason=1' || die "plain client, server: $out"
out=$(hostpair 0 1)
echo "$out" | grep -q 'role=client mode=tcp reason=1' || die "plain server, client: $out"
# One host, one SHUNT_DIR, SHUNT_LOCAL=0: the in-band handshake picks shared
# memory (as through DNAT); the server's exit is read as EOF, not a reset.
for order in cfirst sfirst; do
	P=$(free_port)
	: > "$WORK/ls.out" # a stale "listening" must not start the client
	in_cg env SHUNT_DIR="$WORK/hostA" SHUNT_LOCAL=0 "$SHUNT" run -- "$PEER" server 127.0.0.1 "$P" $order > "$WORK/ls.out" 2>&1 &
	sp=$!
	for _ in $(seq 100); do grep -q listening "$WORK/ls.out" && break; sleep 0.02; done
	out=$(in_cg env SHUNT_DIR="$WORK/hostA" SHUNT_LOCAL=0 "$SHUNT" run -- "$PEER" client 127.0.0.1 "$P" $order 2>&1) ||
		die "in-band shm, $order, client: $out"
	wait "$sp" || die "in-band shm, $order, server: $(cat "$WORK/ls.out")"
	echo "$out" | grep -q 'role=client mode=shm' || die "in-band shm, $order: $out"
	grep -q 'role=server mode=shm' "$WORK/ls.out" || die "in-band shm, $order: $(cat "$WORK/ls.out")"
done
# A non-blocking connect through the in-band handshake: a prompt server's
# connection is shared memory; one slow to accept costs the connect no
# more than a call TCP never blocks in waits (tests/behave/slow_accept_nb:
# 100 ms at most; before, SHUNT_ACCEPT_WAIT_MS's 200 ms), then plain.
B="$ROOT/$BUILD/tests/behave"
out=$(in_cg env LD_PRELOAD="$ROOT/$BUILD/libshunt.so" SHUNT_DIR="$WORK/hostA" SHUNT_LOCAL=0 SHUNT_EXPECT=shm \
	"$B/nonblock_connect" 2>&1) || die "in-band, non-blocking connect: $out"
out=$(in_cg env LD_PRELOAD="$ROOT/$BUILD/libshunt.so" SHUNT_DIR="$WORK/hostA" SHUNT_LOCAL=0 \
	"$B/slow_accept_nb" 2>&1) || die "in-band, non-blocking connect, slow accept: $out"
# A PROPOSAL that comes after the server's accept() stopped waiting for it
# (the fault build's SHUNT_FAULT_PUBLISH_MS: a client preempted before it
# sent it), to a server spinning on non-blocking reads: removed from the
# stream and answered, never read as data (tests/behave/spin_read).
out=$(in_cg env LD_PRELOAD="$ROOT/$BUILD/libshunt-faults.so" SHUNT_FAULT_PUBLISH_MS=50 SHUNT_DIR="$WORK/hostA" \
	SHUNT_LOCAL=0 "$B/spin_read" 2>&1) || die "in-band, late PROPOSAL, spinning reader: $out"
echo "$out" | grep -q 'client: tcp, reason 13' || die "in-band, late PROPOSAL: not the late one? $out"
# ... to a server waiting in poll(), select() or epoll_wait for the request, 300 ms
# later: the PROPOSAL alone wakes none of them, nor counts in FIONREAD
# (tests/behave/late_wake; before, each woke with POLLIN, FIONREAD 100,
# and the read said EAGAIN; epoll_wait until the thirty-sixth session).
out=$(in_cg env LD_PRELOAD="$ROOT/$BUILD/libshunt-faults.so" SHUNT_FAULT_PUBLISH_MS=50 SHUNT_DIR="$WORK/hostA" \
	SHUNT_LOCAL=0 "$B/late_wake" 2>&1) || die "in-band, late PROPOSAL, a server in poll: $out"
echo "$out" | grep -q 'client: tcp, reason 13' || die "in-band, late PROPOSAL to a poll: not the late one? $out"
# ... to a non-blocking accept(): it waits a fortieth of SHUNT_ACCEPT_WAIT_MS
# (5 ms) for the PROPOSAL, a blocking one a tenth (tests/behave/late_offer:
# 15 and 100 ms at most; before, both 20 ms).
out=$(in_cg env LD_PRELOAD="$ROOT/$BUILD/libshunt-faults.so" SHUNT_FAULT_PUBLISH_MS=60 SHUNT_DIR="$WORK/hostA" \
	SHUNT_LOCAL=0 "$B/late_offer" 2>&1) || die "in-band, late PROPOSAL, accept's wait: $out"
# A listener with TCP_DEFER_ACCEPT (Apache's default) wakes its accept()
# only at the first byte: its clients take the in-band handshake, whose
# PROPOSAL is that byte (tests/behave/defer_accept; without the agent they
# stay plain, reason 8; before, each waited for a claim until it gave up).
out=$(in_cg env LD_PRELOAD="$ROOT/$BUILD/libshunt.so" SHUNT_DIR="$WORK/hostA" "$B/defer_accept" 2>&1) ||
	die "deferred accept: $out"
echo "$out" | grep -q '^blocking connect: shm' && echo "$out" | grep -q '^non-blocking connect: shm' ||
	die "deferred accept, not through the in-band handshake: $out"
# A server whose accept()s may come past shunt (a seccomp sandbox, io_uring,
# a static image exec'd with the listener): the agent stops answering for
# its listener, so no client sends it a PROPOSAL it would read as data
# (tests/behave/accept_past_us; before, each read "SHNT..." first).
out=$(in_cg env LD_PRELOAD="$ROOT/$BUILD/libshunt.so" SHUNT_DIR="$WORK/hostA" SHUNT_LOCAL=0 \
	"$B/accept_past_us" 2>&1) || die "accept past shunt: $out"
echo "  one host through the in-band handshake: shared memory, the server's exit read as EOF"
echo "  servers accepting past shunt (sandbox, io_uring, a static image): the agent answers none"
echo "  a listener that defers its accept to the first byte: in-band, shared memory"
echo "  in-band, a late PROPOSAL to a server spinning on non-blocking reads: removed, never read"
echo "  in-band, a late PROPOSAL to a server in poll/select: no wake-up, not in FIONREAD"
echo "  in-band, a late PROPOSAL: a non-blocking accept() waits 5 ms for it, a blocking one 20 ms"
echo "  in-band, non-blocking connect: shared memory; a server slow to accept holds it 5 ms at most"
echo "  shim + agent across hosts: in-band PROPOSAL/DECLINE (no transport yet: reason 12) with data intact"
echo "  either side speaking first; plain peers reason 1 and no handshake bytes"

kill "$agent"; wait "$agent"
in_cg "$ROOT/$BUILD/tests/tools/optcheck" absent > /dev/null || die "the programs outlived shuntd"

# Unprivileged, shuntd says what it lacks and exits; --allow-uid leaves
# other users without an agent (their shim runs on, plain across hosts).
if command -v setpriv > /dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		"$ROOT/$BUILD/shuntd" --cgroup "$CG" > "$WORK/unpriv.log" 2>&1 &&
		die "shuntd ran without privileges"
	grep -q 'needs CAP_BPF' "$WORK/unpriv.log" || die "unprivileged shuntd: $(cat "$WORK/unpriv.log")"
	"$ROOT/$BUILD/shuntd" --cgroup "$CG" --allow-uid 0 > "$WORK/agent2.log" 2>&1 &
	agent=$!
	for _ in $(seq 100); do grep -q ready "$WORK/agent2.log" && break; sleep 0.05; done
	grep -q 'uids 0' "$WORK/agent2.log" || die "shuntd --allow-uid: $(cat "$WORK/agent2.log")"
	in_cg "$ROOT/$BUILD/tests/tools/optcheck" > /dev/null || die "root, allowed, lost the agent"
	in_cg setpriv --reuid=65534 --regid=65534 --clear-groups "$ROOT/$BUILD/tests/tools/optcheck" absent \
		> /dev/null || die "a user not in --allow-uid reached the agent"
	kill "$agent"; wait "$agent"
	echo "  unprivileged shuntd refuses to start, saying why; --allow-uid: other users see no agent"
fi
rmdir "$CG" || die "the test cgroup is still in use"
trap cleanup EXIT
echo "agent: ok"
