#!/usr/bin/env bash
# Description: the checksummed peer across the two devices, both orders:
# RDMA both ends when both run shunt; a plain end keeps the other on TCP
# with reason 1; RDMA off in one end (SHUNT_TRANSPORT=shm on a "remote"
# host) gives reason 12; every byte checked both ways.
set -eu
. "$(dirname "$0")/lib.sh"
PEER=$BUILD/tests/tools/peer
P=7100
die() { echo "FAIL: $*"; exit 1; }
pair() { # srv_env cli_env order -> prints "srvline|cliline"
	local se=$1 ce=$2 o=$3
	P=$((P + 1))
	: > /tmp/s.out # a stale "listening" must not start the client
	env $se "$PEER" server 10.0.0.1 $P "$o" >> /tmp/s.out 2>&1 &
	local sp=$!
	listening /tmp/s.out
	env $ce "$PEER" client 10.0.0.1 $P "$o" > /tmp/c.out 2>&1 || die "client: $(cat /tmp/c.out) / $(cat /tmp/s.out)"
	wait $sp || die "server: $(cat /tmp/s.out)"
	echo "$(grep role= /tmp/s.out)|$(cat /tmp/c.out)"
}
R="LD_PRELOAD=$LIB SHUNT_TRANSPORT=rdma"
for o in cfirst sfirst; do
	out=$(pair "$R" "$R" $o) || die "$out"
	echo "$out" | grep -q 'role=server mode=rdma reason=0' || die "rdma $o server: $out"
	echo "$out" | grep -q 'role=client mode=rdma reason=0' || die "rdma $o client: $out"
	out=$(pair "$R" "" $o) || die "$out"
	echo "$out" | grep -q 'role=server mode=tcp reason=1' || die "plain client $o: $out"
	out=$(pair "" "$R" $o) || die "$out"
	echo "$out" | grep -q 'role=client mode=tcp reason=1' || die "plain server $o: $out"
	out=$(pair "$R" "LD_PRELOAD=$LIB SHUNT_TRANSPORT=shm SHUNT_LOCAL=0 SHUNT_DIR=/tmp/other" $o) || die "$out"
	echo "$out" | grep -q 'role=client mode=tcp reason=12' || die "no rdma on the client $o: $out"
done
echo "peers: rdma both orders; plain peers reason 1; no common transport 12"
