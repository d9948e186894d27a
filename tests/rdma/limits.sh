#!/usr/bin/env bash
# Description: RDMA objects refused by the kernel - the rdma cgroup's
# rdma.max, the limit a container runtime sets on queue pairs, completion
# queues, registrations (hca_object) and device contexts (hca_handle) -
# give plain TCP with reason 3 (resource-limit) for exactly the connections
# that could not have RDMA, never an error the program sees; every byte is
# checked by the stream tool.
#   1. server limited to one link's objects (a PD, 2 MRs, two CQs and two
#      QPs - the data path's and the window binder's - and a memory
#      window per ring: 39): of 40 connections the first link
#      carries 32, the other 8 are TCP, reason 3, on both ends;
#   2. client limited below one link: every connection TCP, reason 3;
#   3. server may not open a device at all (hca_handle=0): TCP, reason 3,
#      and the log says why.
set -eu
. "$(dirname "$0")/lib.sh"
CG=/sys/fs/cgroup
[ -e $CG/cgroup.controllers ] && grep -qw rdma $CG/cgroup.controllers || { echo "skip: no rdma cgroup controller"; exit 77; }
echo +rdma > $CG/cgroup.subtree_control
G=$CG/shunt-limits
mkdir -p $G
trap 'rmdir $G 2> /dev/null' EXIT
STREAM=$BUILD/tests/tools/stream
R=(env LD_PRELOAD="$LIB" SHUNT_TRANSPORT=rdma SHUNT_LOG=1)
die() { echo "FAIL: $*"; exit 1; }
P=7700
limit() { for d in rxe0 rxe1; do echo "$d $1" > $G/rdma.max; done; }
limited() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$G" "$@"; }
run() { # who-is-limited connections
	P=$((P + 1))
	local s=("${R[@]}") c=("${R[@]}")
	[ "$1" = server ] && s=(limited "${R[@]}")
	[ "$1" = client ] && c=(limited "${R[@]}")
	: > /tmp/s.out # a stale "listening" must not start the client
	"${s[@]}" "$STREAM" server 10.0.0.1 $P 1 block "$2" >> /tmp/s.out 2>&1 &
	local sp=$!
	listening /tmp/s.out
	"${c[@]}" "$STREAM" client 10.0.0.1 $P 1 block "$2" > /tmp/c.out 2>&1 || die "client: $(tail /tmp/c.out)"
	wait $sp || die "server: $(tail /tmp/s.out)"
}
count() { grep -c "^role=$1 .*mode=$2 reason=$3 bytes=1048576 ok" /tmp/"${1:0:1}".out || true; }

limit "hca_handle=max hca_object=39"
run server 40
# What the limit decided at set-up: 32 on the link, 8 declined (reason 3).
# A link that fails later under this emulated load (rxe: retry exceeded)
# moves its connections to TCP with reason 16/17: still the link's 32.
onlink() { echo $(($(count "$1" rdma 0) + $(count "$1" tcp 16) + $(count "$1" tcp 17))); }
[ "$(onlink server)" = 32 ] && [ "$(count server tcp 3)" = 8 ] ||
	die "server with one link's objects: $(onlink server) on the link, $(count server tcp 3) reason 3; $(grep -Ev 'mode=(rdma reason=0|tcp reason=(3|16|17)) ' /tmp/s.out | grep -v spare | tail -8)"
[ "$(onlink client)" = 32 ] && [ "$(count client tcp 3)" = 8 ] ||
	die "its client: $(onlink client) on the link, $(count client tcp 3) reason 3; $(grep -Ev 'mode=(rdma reason=0|tcp reason=(3|16|17)) ' /tmp/c.out | grep -v spare | tail -8)"
grep -q "no link on rxe0" /tmp/s.out || die "no reason logged: $(tail -3 /tmp/s.out)"
echo "limits: one link's objects (hca_object=39): 32 connections on the link ($(count server rdma 0) still rdma at the end), 8 tcp reason 3, intact"

limit "hca_handle=max hca_object=3"
run client 4
[ "$(count client tcp 3)" = 4 ] || die "client below one link: $(tail -5 /tmp/c.out)"
[ "$(grep -c 'mode=tcp' /tmp/s.out)" = 4 ] || die "its server: $(tail -5 /tmp/s.out)"
echo "limits: client below one link (hca_object=3): 4 connections tcp reason 3, intact"

limit "hca_handle=0 hca_object=max"
run server 4
[ "$(count server tcp 3)" = 4 ] || die "server without a device context: $(tail -5 /tmp/s.out)"
[ "$(count client tcp 3)" = 4 ] || die "its client: $(tail -5 /tmp/c.out)"
grep -q "RDMA device would not open" /tmp/s.out || die "no reason logged: $(grep rdma: /tmp/s.out | tail -3)"
echo "limits: no device context (hca_handle=0): 4 connections tcp reason 3, intact"
