#!/usr/bin/env bash
# Description: shuntd (issue #3, first slice) loads its sock_ops program on a
# cgroup v2 directory and hands out the socket-cookie array; inside that
# cgroup a registered client and listener exchange the TCP option (nonce,
# answer ~nonce), plain sockets see none, a registered client facing a plain
# listener learns so; killing shuntd detaches the program and removes its
# socket.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "skip: needs root (CAP_BPF, CAP_NET_ADMIN)"; exit 77; }
[ -x "$ROOT/$BUILD/shuntd" ] || { echo "skip: shuntd not built (libbpf-dev, clang)"; exit 77; }
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cg2" ] || { echo "skip: no cgroup v2 mounted"; exit 77; }
CG="$cg2/shunt-test-$$"
mkdir "$CG" || die "cannot create $CG"
sock="$WORK/agent.sock"
replayd= RCG=
cleanup_agent() {
	kill "$agent" $replayd 2>/dev/null; wait "$agent" $replayd 2>/dev/null
	rmdir "$CG" ${RCG:+"$RCG"} 2>/dev/null
	rm -rf ${shared:+"$shared"}
	cleanup
}
"$ROOT/$BUILD/shuntd" --cgroup "$CG" --socket "$sock" > "$WORK/agent.log" 2>&1 &
agent=$!
trap cleanup_agent EXIT
for _ in $(seq 100); do grep -q ready "$WORK/agent.log" && break; sleep 0.05; done
grep -q ready "$WORK/agent.log" || die "shuntd did not start: $(cat "$WORK/agent.log")"
sh -c "echo \$\$ > '$CG/cgroup.procs'; exec '$ROOT/$BUILD/tests/tools/optcheck' '$sock'" || die "option exchange"
grep -q 'map handed to pid' "$WORK/agent.log" || die "shuntd did not log the peer's credentials"

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
sh -c "echo \$\$ > '$CG/cgroup.procs'; exec '$ROOT/$BUILD/tests/tools/optcheck' '$sock' replay $P" || die "replay detection"
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
	[ "$1" = 1 ] && s=(env SHUNT_DIR="$WORK/hostB" SHUNT_AGENT_SOCK="$sock" "$SHUNT" run --)
	[ "$2" = 1 ] && c=(env SHUNT_DIR="$WORK/hostA" SHUNT_AGENT_SOCK="$sock" "$SHUNT" run --)
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
echo "  shim + agent across hosts: in-band PROPOSAL/DECLINE (no transport yet: reason 12) with data intact"
echo "  either side speaking first; plain peers reason 1 and no handshake bytes"

kill "$agent"; wait "$agent"
[ ! -e "$sock" ] || die "shuntd left its socket behind"

# Unprivileged, shuntd says what it lacks and exits; --allow-uid keeps the
# array from other users (their shim runs on without an agent).
if command -v setpriv > /dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		"$ROOT/$BUILD/shuntd" --cgroup "$CG" --socket "$WORK/nobody.sock" > "$WORK/unpriv.log" 2>&1 &&
		die "shuntd ran without privileges"
	grep -q 'needs CAP_BPF' "$WORK/unpriv.log" || die "unprivileged shuntd: $(cat "$WORK/unpriv.log")"
	shared=$(mktemp -d /tmp/shunt-shared.XXXXXX); chmod 1777 "$shared"
	sock="$shared/agent.sock"
	"$ROOT/$BUILD/shuntd" --cgroup "$CG" --socket "$sock" --allow-uid 0 > "$WORK/agent2.log" 2>&1 &
	agent=$!
	for _ in $(seq 100); do grep -q ready "$WORK/agent2.log" && break; sleep 0.05; done
	P=$(free_port)
	"$PEER" server 127.0.0.1 "$P" cfirst > "$WORK/u.out" 2>&1 &
	us=$!
	wait_port "$P"
	setpriv --reuid=65534 --regid=65534 --clear-groups env SHUNT_LOG=1 SHUNT_DIR="$shared" \
		SHUNT_AGENT_SOCK="$sock" "$SHUNT" run -- "$PEER" client 127.0.0.1 "$P" cfirst > "$WORK/uc.out" 2>&1 ||
		die "client of a refused user: $(cat "$WORK/uc.out")"
	wait "$us"
	grep -q 'absent' "$WORK/uc.out" || die "refused user's shim: $(cat "$WORK/uc.out")"
	grep -q 'refused pid [0-9]* uid 65534' "$WORK/agent2.log" || die "shuntd: $(cat "$WORK/agent2.log")"
	kill "$agent"; wait "$agent"
	rm -rf "$shared"
	echo "  unprivileged shuntd refuses to start, saying why; --allow-uid: other users run without it"
fi
rmdir "$CG" || die "the test cgroup is still in use"
trap cleanup EXIT
echo "agent: ok"
