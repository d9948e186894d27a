#!/usr/bin/env bash
# Runs in BOTH guests of tests/vm/pair.sh (see tests/integration/rdma2.sh):
# each host starts its own agent; A serves, B connects.  With no forcing at
# all (two kernels: two boot ids) the negotiation picks RDMA: the peers
# check every byte both ways and report mode rdma on both hosts.
set -u
BUILD=${BUILD:-build}
build() { echo "$PWD/$BUILD/$1"; }
"$(build shuntd)" --cgroup /sys/fs/cgroup --socket /tmp/a.sock > /tmp/a.log 2>&1 &
for _ in $(seq 100); do grep -q ready /tmp/a.log && break; sleep 0.1; done
export SHUNT_AGENT_SOCK=/tmp/a.sock SHUNT_ACCEPT_WAIT_MS=30000 SHUNT_LOG=1
S=("$(build shunt)" run --)
PEER=$(build tests/tools/peer)
if [ "$VM_HOST" = A ]; then
	for o in cfirst sfirst; do
		"${S[@]}" "$PEER" server 10.1.0.1 7400 $o || exit 1
	done
else
	for o in cfirst sfirst; do
		for _ in $(seq 300); do # until A's server listens
			"${S[@]}" "$PEER" client 10.1.0.1 7400 $o > /tmp/c.out 2>&1 && break
			sleep 0.2
		done
		cat /tmp/c.out
		grep -q 'role=client mode=rdma reason=0' /tmp/c.out || exit 1
	done
fi
