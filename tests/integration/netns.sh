#!/usr/bin/env bash
# Description: processes in two network namespaces joined by a veth pair
# (containers on one host) that share SHUNT_DIR: a connection across the veth
# is accelerated; loopback in each namespace reaches that namespace's own
# server only (a plain one here: plain, never the other namespace's shunt
# server on the same port); namespaces are gone afterwards.
. "$(dirname "$0")/lib.sh"
PEER="$ROOT/$BUILD/tests/tools/peer"
[ "$(id -u)" = 0 ] || { echo "skip: needs root for network namespaces"; exit 77; }
ns1=shunt-t1-$$ ns2=shunt-t2-$$
ip netns add "$ns1" 2>/dev/null || { echo "skip: ip netns unavailable"; exit 77; }
ip netns add "$ns2"
cleanup_ns() {
	ip netns pids "$ns1" 2>/dev/null | xargs -r kill 2>/dev/null
	ip netns pids "$ns2" 2>/dev/null | xargs -r kill 2>/dev/null
	ip netns del "$ns1" 2>/dev/null; ip netns del "$ns2" 2>/dev/null
	cleanup
}
trap cleanup_ns EXIT
ip link add "v1-$$" netns "$ns1" type veth peer name "v2-$$" netns "$ns2"
ip -n "$ns1" addr add 10.77.0.1/24 dev "v1-$$"; ip -n "$ns2" addr add 10.77.0.2/24 dev "v2-$$"
for n in "$ns1" "$ns2"; do ip -n "$n" link set lo up; done
ip -n "$ns1" link set "v1-$$" up; ip -n "$ns2" link set "v2-$$" up

in_ns() { local n=$1; shift; ip netns exec "$n" "$@"; }
P=$(free_port)

# 1. across the veth: shunt server in ns1 (on 0.0.0.0), shunt client in ns2
: > "$WORK/s1.out" # a stale "listening" must not start the client
in_ns "$ns1" "$SHUNT" run -- "$PEER" server 0.0.0.0 "$P" cfirst > "$WORK/s1.out" 2>&1 &
for _ in $(seq 100); do grep -q listening "$WORK/s1.out" && break; sleep 0.02; done
in_ns "$ns2" "$SHUNT" run -- "$PEER" client 10.77.0.1 "$P" cfirst > "$WORK/c1.out" || die "client across veth failed"
wait $! || die "server in ns1 failed: $(cat "$WORK/s1.out")"
grep -q 'mode=shm' "$WORK/c1.out" || die "across veth not accelerated: $(cat "$WORK/c1.out")"
grep -q 'role=server mode=shm' "$WORK/s1.out" || die "server side not accelerated: $(cat "$WORK/s1.out")"
echo "  ns2 -> ns1 over veth: accelerated both ends"

# 2. loopback never crosses a namespace: shunt server on 127.0.0.1:P in ns1,
#    plain server on 127.0.0.1:P in ns2, shunt client in ns2 dials 127.0.0.1
: > "$WORK/s2.out" # a stale "listening" must not start the client
in_ns "$ns1" "$SHUNT" run -- "$PEER" server 127.0.0.1 "$P" sfirst > "$WORK/s2.out" 2>&1 &
s2=$!
in_ns "$ns2" "$PEER" server 127.0.0.1 "$P" sfirst > "$WORK/s3.out" 2>&1 &
s3=$!
for _ in $(seq 100); do grep -q listening "$WORK/s2.out" && grep -q listening "$WORK/s3.out" && break; sleep 0.02; done
in_ns "$ns2" "$SHUNT" run -- "$PEER" client 127.0.0.1 "$P" sfirst > "$WORK/c2.out" || die "loopback client in ns2 failed"
wait "$s3" || die "plain server in ns2 failed"
grep -q 'mode=tcp reason=1' "$WORK/c2.out" || die "ns2 loopback client: $(cat "$WORK/c2.out")"
grep -q 'role=server mode=none' "$WORK/s3.out" || die "ns2's own server did not serve it"
kill "$s2" 2>/dev/null; wait "$s2" 2>/dev/null
echo "  loopback in ns2 with a shunt server on the same port in ns1: plain, to ns2's server"

cleanup_ns; trap - EXIT
ip netns list | grep -q "shunt-t[12]-$$" && die "namespaces left behind"
echo "netns: ok"
