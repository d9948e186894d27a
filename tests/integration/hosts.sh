#!/usr/bin/env bash
# Description: the negotiation matrix across real network paths.  Two
# "hosts" (each its own network namespace, cgroup, shuntd and SHUNT_DIR)
# joined through a router namespace by veth pairs.  Every cell runs the
# checksummed peer both ways and asserts each end's outcome and reason:
# shunt or plain client x shunt or plain server, client- or server-first,
# routed directly, through DNAT (iptables in the router), through a router
# that strips the option (TCPOPTSTRIP) or rewrites it (a tc BPF program),
# to a server whose stack replays unknown options;
# same host reached through DNAT (shared memory from the in-band handshake);
# agents killed while connections are open (they keep working, data
# intact), then absent (reason no-agent), then restarted.
. "$(dirname "$0")/lib.sh"
PEER="$ROOT/$BUILD/tests/tools/peer"
[ "$(id -u)" = 0 ] || { echo "skip: needs root (namespaces, cgroups, BPF)"; exit 77; }
[ -x "$ROOT/$BUILD/shuntd" ] || { echo "skip: shuntd not built (libbpf-dev, clang)"; exit 77; }
command -v iptables > /dev/null || { echo "skip: iptables missing (scripts/deps.sh)"; exit 77; }
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$cg2" ] || { echo "skip: no cgroup v2 mounted"; exit 77; }

hA=shunt-hA-$$ hB=shunt-hB-$$ rt=shunt-rt-$$
cgA="$cg2/shunt-hostA-$$" cgB="$cg2/shunt-hostB-$$" cgR="$cg2/shunt-hostR-$$"
agents=()
cleanup_hosts() {
	for n in "$hA" "$hB" "$rt"; do ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null; done
	kill "${agents[@]}" 2>/dev/null; wait 2>/dev/null
	for n in "$hA" "$hB" "$rt"; do ip netns del "$n" 2>/dev/null; done
	rmdir "$cgA" "$cgB" "$cgR" 2>/dev/null
	cleanup
}
trap cleanup_hosts EXIT
ip netns add "$hA" 2>/dev/null || { echo "skip: ip netns unavailable"; exit 77; }
ip netns add "$hB"; ip netns add "$rt"
mkdir "$cgA" "$cgB" "$cgR" "$WORK/dirA" "$WORK/dirB"
ip link add a0 netns "$hA" type veth peer name a1 netns "$rt"
ip link add b0 netns "$hB" type veth peer name b1 netns "$rt"
ip -n "$hA" addr add 10.9.1.2/24 dev a0; ip -n "$rt" addr add 10.9.1.1/24 dev a1
ip -n "$hB" addr add 10.9.2.2/24 dev b0; ip -n "$rt" addr add 10.9.2.1/24 dev b1
for l in "$hA a0" "$rt a1" "$hB b0" "$rt b1"; do set -- $l; ip -n "$1" link set "$2" up; done
for n in "$hA" "$hB" "$rt"; do ip -n "$n" link set lo up; done
ip -n "$hA" route add default via 10.9.1.1; ip -n "$hB" route add default via 10.9.2.1
ip netns exec "$rt" sysctl -qw net.ipv4.ip_forward=1
SP=18080 SP2=18081
ip netns exec "$rt" iptables -t nat -A PREROUTING -p tcp -d 10.9.1.1 --dport 9000 \
	-j DNAT --to-destination "10.9.2.2:$SP"

start_agent() { # A|B
	local cg=cgA; [ "$1" = B ] && cg=cgB
	"$ROOT/$BUILD/shuntd" --cgroup "${!cg}" > "$WORK/agent$1.log" 2>&1 &
	agents+=($!)
	eval "agent$1=$!"
	for _ in $(seq 100); do grep -q ready "$WORK/agent$1.log" && return; sleep 0.05; done
	die "shuntd $1 did not start: $(cat "$WORK/agent$1.log")"
}
# run_on HOST NS SHUNT(0|1) CMD...: a process of HOST (its cgroup, agent
# and SHUNT_DIR), in network namespace NS
run_on() {
	local h=$1 ns=$2 sh=$3 cg=cgA pre=(); shift 3
	[ "$h" = B ] && cg=cgB
	[ "$h" = R ] && cg=cgR
	[ "$sh" = 1 ] && pre=(env SHUNT_LOG=${HLOG:-0} SHUNT_DIR="$WORK/dir$h" "$SHUNT" run --)
	# the cgroup first: `ip netns exec` mounts its own /sys
	sh -c "echo \$\$ > '${!cg}/cgroup.procs'; exec \"\$@\"" sh ip netns exec "$ns" "${pre[@]}" "$@"
}
# cell NAME SRV CLI ORDER DIAL_ADDR DIAL_PORT CLIENT_HOST EXPECT_SRV EXPECT_CLI
# The server is host B's (or SRV_HOST's), in hB, on port SP; EXPECT is
# "tcp reason=N", "shm reason=0" or "none" (a plain process).
cell() {
	local name=$1 srv=$2 cli=$3 order=$4 addr=$5 port=$6 ch=$7 es=$8 ec=$9 sp cp
	: > "$WORK/s.out" # a stale "listening" must not start the client
	run_on "${SRV_HOST:-B}" "$hB" "$srv" "$PEER" server 0.0.0.0 "$SP" "$order" > "$WORK/s.out" 2>&1 &
	sp=$!
	for _ in $(seq 200); do grep -q listening "$WORK/s.out" && break; sleep 0.01; done
	timeout 20 bash -c "$(declare -f run_on); cgA='$cgA' cgB='$cgB' cgR='$cgR' WORK='$WORK' SHUNT='$SHUNT'; \
		run_on $ch $hA $cli '$PEER' client $addr $port $order" > "$WORK/c.out" 2>&1 ||
		die "$name: client failed: $(cat "$WORK/c.out") / server: $(cat "$WORK/s.out")"
	timeout 20 tail --pid="$sp" -f /dev/null; wait "$sp" || die "$name: server failed: $(cat "$WORK/s.out")"
	grep -q "role=server mode=$es\b" "$WORK/s.out" || die "$name: server: $(grep role= "$WORK/s.out"), want $es"
	grep -q "role=client mode=$ec\b" "$WORK/c.out" || die "$name: client: $(cat "$WORK/c.out"), want $ec"
	ncells=$((ncells + 1))
}
ncells=0
start_agent A; start_agent B

# 1. two hosts, routed: capable ends agree, then decline (no transport
#    between hosts yet: reason 12); a plain end is never touched
for o in cfirst sfirst; do
	cell "direct shunt/shunt $o" 1 1 $o 10.9.2.2 $SP A "tcp reason=12" "tcp reason=12"
	cell "direct shunt srv/plain cli $o" 1 0 $o 10.9.2.2 $SP A "tcp reason=1" "none"
	cell "direct plain srv/shunt cli $o" 0 1 $o 10.9.2.2 $SP A "none" "tcp reason=1"
done
cell "direct plain/plain" 0 0 cfirst 10.9.2.2 $SP A "none" "none"
echo "  two hosts, routed: shunt/shunt reason 12 both ends; plain ends untouched"

# 2. through DNAT in the router (a service address / port mapping)
for o in cfirst sfirst; do
	cell "dnat shunt/shunt $o" 1 1 $o 10.9.1.1 9000 A "tcp reason=12" "tcp reason=12"
	cell "dnat shunt srv/plain cli $o" 1 0 $o 10.9.1.1 9000 A "tcp reason=1" "none"
	cell "dnat plain srv/shunt cli $o" 0 1 $o 10.9.1.1 9000 A "none" "tcp reason=1"
done
echo "  two hosts through DNAT: the same outcomes"

# 3. one host through DNAT: host B's client in another namespace reaches
#    host B's server only through the router's DNAT, which the registry
#    cannot see; the in-band handshake finds one host, one SHUNT_DIR
for o in cfirst sfirst; do
	cell "same host via dnat $o" 1 1 $o 10.9.1.1 9000 B "shm reason=0" "shm reason=0"
done
echo "  one host through DNAT: shared memory chosen in-band, both ends"

# 4. a router that strips the option: nobody answers, both ends plain
ip netns exec "$rt" iptables -t mangle -A FORWARD -p tcp -j TCPOPTSTRIP --strip-options 254
for o in cfirst sfirst; do
	cell "stripped $o" 1 1 $o 10.9.2.2 $SP A "tcp reason=1" "tcp reason=1"
done
ip netns exec "$rt" iptables -t mangle -F FORWARD
echo "  option stripped by the router: reason 1 both ends"

# 5. a router that rewrites the nonce: the server answers a nonce the client
#    never sent -> the client stays plain (14); the server's awaited
#    PROPOSAL never comes -> plain (13); no byte lost, no wait beyond it
ip netns exec "$rt" tc qdisc add dev a1 clsact
ip netns exec "$rt" tc filter add dev a1 ingress bpf da obj "$ROOT/$BUILD/tests/bpf/rewrite.bpf.o" sec tc
for o in cfirst sfirst; do
	cell "rewritten $o" 1 1 $o 10.9.2.2 $SP A "tcp reason=13" "tcp reason=14"
done
ip netns exec "$rt" tc qdisc del dev a1 clsact
echo "  option rewritten by the router: client 14, server 13, data intact"

# 5b. a server host whose stack replays unknown options (its own cgroup
#     with tests/bpf/replay.bpf.o): the client sees its nonce echoed
"$ROOT/$BUILD/tests/bpf/replayd" "$ROOT/$BUILD/tests/bpf/replay.bpf.o" "$cgR" > "$WORK/replayd.log" 2>&1 &
replayd=$!
agents+=($replayd)
for _ in $(seq 100); do grep -q ready "$WORK/replayd.log" && break; sleep 0.05; done
grep -q ready "$WORK/replayd.log" || die "replayd did not start"
for o in cfirst sfirst; do
	SRV_HOST=R cell "replaying server $o" 0 1 $o 10.9.2.2 $SP A "none" "tcp reason=14"
done
kill "$replayd"; wait "$replayd" 2>/dev/null
echo "  a server replaying unknown options: client 14, data intact"

# 6. agents killed while connections are open: a negotiated TCP connection
#    between the hosts and a shared-memory one through DNAT keep working
: > "$WORK/ks1.out" # a stale "listening" must not start the client
run_on B "$hB" 1 "$PEER" server 0.0.0.0 "$SP" cfirst x > "$WORK/ks1.out" 2>&1 &
k1=$!
run_on B "$hB" 1 "$PEER" server 0.0.0.0 "$SP2" sfirst x > "$WORK/ks2.out" 2>&1 &
k2=$!
for _ in $(seq 200); do grep -q listening "$WORK/ks1.out" && grep -q listening "$WORK/ks2.out" && break; sleep 0.01; done
run_on B "$hA" 1 "$PEER" client 10.9.1.1 9000 cfirst "$WORK/go" > "$WORK/kc1.out" 2>&1 &
c1=$!
run_on A "$hA" 1 "$PEER" client 10.9.2.2 "$SP2" sfirst "$WORK/go" > "$WORK/kc2.out" 2>&1 &
c2=$!
sleep 0.5
kill "$agentA" "$agentB"; wait "$agentA" "$agentB" 2>/dev/null
touch "$WORK/go"
wait "$c1" && wait "$c2" && wait "$k1" && wait "$k2" || die "connections across the agents' death: $(cat "$WORK"/k*.out)"
grep -q 'role=client mode=shm reason=0' "$WORK/kc1.out" || die "shm connection: $(cat "$WORK/kc1.out")"
grep -q 'role=client mode=tcp reason=12' "$WORK/kc2.out" || die "tcp connection: $(cat "$WORK/kc2.out")"
echo "  agents killed mid-connection: a shm and a negotiated tcp connection finish intact"

# 7. no agent: to another host, plain with the reason saying why
cell "no agent" 1 1 cfirst 10.9.2.2 $SP A "tcp reason=1" "tcp reason=15"
# 8. restarted: negotiation is back
start_agent A; start_agent B
cell "restarted" 1 1 sfirst 10.9.2.2 $SP A "tcp reason=12" "tcp reason=12"
echo "  agents absent: client reason 15 (no-agent); restarted: negotiated again"

kill "$agentA" "$agentB"; wait "$agentA" "$agentB" 2>/dev/null
cleanup_hosts; trap cleanup EXIT
ip netns list | grep -q "shunt-[hr][ABt]*-$$" && die "namespaces left behind"
[ ! -d "$cgA" ] && [ ! -d "$cgB" ] && [ ! -d "$cgR" ] || die "cgroups left behind"
echo "hosts: $((ncells + 2)) cells ok"
