#!/usr/bin/env bash
# Description: the in-band handshake against a hostile peer, on live
# sockets.  One end runs the fault-injection build of the shim
# (build/libshunt-faults.so, SHUNT_FAULT_HS=SEED: one byte of every
# handshake message it sends is changed), the other the real one, in an
# agent's cgroup; for many seeds, each end in turn, between two "hosts"
# (separate SHUNT_DIRs: PROPOSAL -> DECLINE) and on one host reached
# without the registry (SHUNT_LOCAL=0: PROPOSAL -> ACCEPT -> CONFIRM over
# shared memory), client- and server-first.  Every run must end with both
# peers' checksummed data intact both ways, within a bound, and the honest
# end must report a reason (or shared memory only when the message it got
# was still valid): no crash, no hang, no byte lost.
. "$(dirname "$0")/lib.sh"
PEER="$ROOT/$BUILD/tests/tools/peer"
FAULTS="$ROOT/$BUILD/libshunt-faults.so"
[ "$(id -u)" = 0 ] || { echo "skip: needs root (CAP_BPF, CAP_NET_ADMIN)"; exit 77; }
[ -x "$ROOT/$BUILD/shuntd" ] || { echo "skip: shuntd not built (libbpf-dev, clang)"; exit 77; }
[ -f "$FAULTS" ] || die "missing $FAULTS (make tests)"
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cg2" ] || { echo "skip: no cgroup v2 mounted"; exit 77; }
CG="$cg2/shunt-hostile-$$"
mkdir "$CG" || die "cannot create $CG"
cleanup_hostile() { kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null; rmdir "$CG" 2>/dev/null; cleanup; }
"$ROOT/$BUILD/shuntd" --cgroup "$CG" > "$WORK/agent.log" 2>&1 &
agent=$!
trap cleanup_hostile EXIT
for _ in $(seq 100); do grep -q ready "$WORK/agent.log" && break; sleep 0.05; done
grep -q ready "$WORK/agent.log" || die "shuntd did not start: $(cat "$WORK/agent.log")"
mkdir -p "$WORK/hostA" "$WORK/hostB"

# end ROLE DIR FAULTSEED(or -) ARGS...: one peer, in the agent's cgroup
end() {
	local dir=$1 seed=$2; shift 2
	local lib="$ROOT/$BUILD/libshunt.so" f=()
	[ "$seed" != - ] && lib=$FAULTS f=(SHUNT_FAULT_HS="$seed")
	sh -c "echo \$\$ > '$CG/cgroup.procs'; exec \"\$@\"" sh env "${f[@]}" SHUNT_LOCAL=0 \
		SHUNT_DIR="$dir" LD_PRELOAD="$lib" timeout 20 "$PEER" "$@"
}
runs=0 declined=0 shm=0
one() { # hostdirs(two|one) hostile(client|server) seed order
	local cdir="$WORK/hostA" sdir="$WORK/hostB" cs=- ss=- P
	[ "$1" = one ] && cdir="$WORK/hostB"
	[ "$2" = client ] && cs=$3
	[ "$2" = server ] && ss=$3
	P=$(free_port)
	: > "$WORK/s.out" # a stale "listening" must not start the client
	end "$sdir" "$ss" server 127.0.0.1 "$P" "$4" > "$WORK/s.out" 2>&1 &
	local sp=$!
	for _ in $(seq 200); do grep -q listening "$WORK/s.out" && break; sleep 0.01; done
	end "$cdir" "$cs" client 127.0.0.1 "$P" "$4" > "$WORK/c.out" 2>&1 ||
		die "$*: client: $(cat "$WORK/c.out") / server: $(cat "$WORK/s.out")"
	wait "$sp" || die "$*: server: $(cat "$WORK/s.out")"
	# the honest end: a reason, or shared memory agreed by both ends
	local honest=$WORK/s.out other=$WORK/c.out
	[ "$2" = server ] && honest=$WORK/c.out other=$WORK/s.out
	if grep -q 'mode=shm' "$honest"; then
		grep -q 'mode=shm' "$other" || die "$*: one end in shared memory: $(cat "$honest" "$other")"
		shm=$((shm + 1))
	else
		grep -q 'mode=tcp reason=[1-9]' "$honest" || die "$*: honest end: $(cat "$honest")"
		grep -q 'mode=tcp' "$other" || die "$*: the ends disagree: $(cat "$honest" "$other")"
		declined=$((declined + 1))
	fi
	runs=$((runs + 1))
}
for seed in $(seq 1 ${HOSTILE_SEEDS:-12}); do
	for who in client server; do
		o=cfirst; [ $((seed % 2)) = 0 ] && o=sfirst
		one two "$who" "$seed" "$o"
		one one "$who" "$seed" "$o"
	done
done
echo "  $runs runs with a mutated handshake byte: data intact every time; $declined plain with a reason, $shm still valid and agreed"
kill "$agent"; wait "$agent" 2>/dev/null
rmdir "$CG" || die "the cgroup is still in use"
trap cleanup EXIT
echo "hostile: ok"
