#!/usr/bin/env bash
# Description: the library built without libibverbs' headers (issue #14:
# RDMA is compiled only when they exist, and nothing stands in for it) -
# no RDMA code in it, and the behaviour programs run over shared memory on
# it as on the full one (fork, exec, a passed descriptor, epoll included).
# Time limit: 300
. "$(dirname "$0")/lib.sh"
B=$BUILD/no-rdma
make -s -C "$ROOT" HAVE_VERBS= BUILD="$B" "$B/libshunt.so" > "$WORK/make.log" 2>&1 ||
	die "the build without RDMA failed: $(tail -5 "$WORK/make.log")"
LIBN="$ROOT/$B/libshunt.so"
if nm "$LIBN" | grep -qi 'rdma_\|ibv_'; then
	die "RDMA code in the library built without it: $(nm "$LIBN" | grep -i 'rdma_\|ibv_' | head -3)"
fi
echo "no-rdma: built without libibverbs' headers, no RDMA symbol in it"
for t in echo_basic fork_handoff epoll_modes half_close fd_pass exec_inherit; do
	[ -x "$ROOT/$BUILD/tests/behave/$t" ] || die "$t is not built"
	LD_PRELOAD="$LIBN" SHUNT_EXPECT=shm timeout 60 "$ROOT/$BUILD/tests/behave/$t" > "$WORK/$t.log" 2>&1 ||
		die "$t over shared memory with the library built without RDMA: $(tail -5 "$WORK/$t.log")"
done
echo "no-rdma: echo_basic fork_handoff epoll_modes half_close fd_pass exec_inherit accelerated (shm)"
