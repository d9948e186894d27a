#!/usr/bin/env bash
# Description: a writer that ends right after writing, with bytes still
# queued (libshunt-faults.so SHUNT_FAULT_RDMA_HOLD: everything past 4,096
# bytes is accepted by write() but not posted, as if the process ended
# before its send queue ran).  _exit() flushes them first: every byte,
# then EOF, as TCP.  SIGKILL cannot: the reader gets the 4,096 posted bytes
# then ECONNRESET - never a clean EOF short of what write() accepted.  Nor
# can _exit() in a signal handler (the thread it interrupted may hold the
# locks a flush takes): the same 4,096 bytes, then ECONNRESET, no hang.
set -eu
die() { echo "FAIL: $*"; exit 1; }
env LD_PRELOAD="$BUILD/libshunt-faults.so" SHUNT_TRANSPORT=rdma SHUNT_TEST_ADDR=10.0.0.1 \
	SHUNT_EXPECT=rdma SHUNT_FAULT_RDMA_HOLD=4096 "$BUILD/tests/behave/killed_writer" > /tmp/kw.out 2>&1 ||
	die "killed_writer: $(tail -5 /tmp/kw.out)"
grep -Eq '^_exit: ([0-9]+) of \1 bytes, then EOF' /tmp/kw.out || die "_exit: $(tail -5 /tmp/kw.out)"
grep -Eq '^killed: 4096 of [0-9]+ bytes, then ECONNRESET' /tmp/kw.out || die "killed: $(tail -5 /tmp/kw.out)"
grep -Eq '^handler: 4096 of [0-9]+ bytes, then ECONNRESET' /tmp/kw.out || die "handler: $(tail -5 /tmp/kw.out)"
grep -E '^(_exit|killed|handler):' /tmp/kw.out | sed 's/^/exit: /'
