#!/usr/bin/env bash
# Description: RDMA resources exhausted (locked memory: RLIMIT_MEMLOCK of
# 64 KiB without CAP_IPC_LOCK, so no memory registration succeeds) give
# plain TCP with reason 3 (resource-limit), never an error the program sees:
# on the client (it cannot offer RDMA), then on the server (it declines).
# Every byte is checked both ways by the peers.
set -eu
. "$(dirname "$0")/lib.sh"
command -v setpriv > /dev/null || { echo "skip: no setpriv in the guest"; exit 77; }
PEER=$BUILD/tests/tools/peer
die() { echo "FAIL: $*"; exit 1; }
P=7300
R=(env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma)
starved() { # a process without CAP_IPC_LOCK and 64 KiB of lockable memory
	setpriv --bounding-set -ipc_lock --inh-caps -ipc_lock bash -c 'ulimit -l 64; exec "$@"' sh "$@"
}
pair() { # who-starves
	P=$((P + 1))
	local s=("${R[@]}") c=("${R[@]}")
	# emptied here, not by the background job's redirection (which may
	# come after the wait below looked): the previous pair's "listening"
	# must not start the client before this server listens
	: > /tmp/s.out
	if [ "$1" = server ]; then
		starved "${s[@]}" "$PEER" server 10.0.0.1 $P cfirst >> /tmp/s.out 2>&1 &
	else
		"${s[@]}" "$PEER" server 10.0.0.1 $P cfirst >> /tmp/s.out 2>&1 &
	fi
	local sp=$!
	listening /tmp/s.out
	if [ "$1" = client ]; then
		starved "${c[@]}" "$PEER" client 10.0.0.1 $P cfirst > /tmp/c.out 2>&1 || die "client: $(cat /tmp/c.out)"
	else
		"${c[@]}" "$PEER" client 10.0.0.1 $P cfirst > /tmp/c.out 2>&1 || die "client: $(cat /tmp/c.out)"
	fi
	wait $sp || die "server: $(cat /tmp/s.out)"
}
pair client
grep -q 'role=client mode=tcp reason=3' /tmp/c.out || die "starved client: $(cat /tmp/c.out)"
grep -q 'role=server mode=tcp' /tmp/s.out || die "its server: $(cat /tmp/s.out)"
pair server
grep -q 'role=server mode=tcp reason=3' /tmp/s.out || die "starved server: $(cat /tmp/s.out)"
grep -q 'role=client mode=tcp reason=3' /tmp/c.out || die "its client: $(cat /tmp/c.out)"
echo "resources: no registrable memory -> TCP, reason 3, data intact (client or server starved)"
