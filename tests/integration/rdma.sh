#!/usr/bin/env bash
# Description: the RDMA suite (tests/rdma/run.sh) inside the Soft-RoCE QEMU
# guest (tests/vm/run.sh): every behaviour program, the peers and the
# fallbacks over real verbs on rxe.  Skipped (77) only where QEMU or a guest
# kernel is missing; `make test-rdma` runs the same suite with its output.
# Time limit: 1500
. "$(dirname "$0")/lib.sh"
out=$("$ROOT/tests/vm/run.sh" -t 1500 -- env BUILD="$BUILD" bash tests/rdma/run.sh 2>&1)
rc=$?
echo "$out" | tail -40
[ $rc = 77 ] && exit 77
echo "$out" | grep -Eq '^[0-9]+ passed, 0 failed' || die "the RDMA suite failed (rc $rc)"
echo "rdma: $(echo "$out" | grep -E '^[0-9]+ passed' | tail -1)"
